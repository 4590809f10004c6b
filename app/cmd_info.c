/* brigade info MODEL.gguf [--json] [--no-mmap]: what a GGUF file holds. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "cli.h"
#include "commands.h"

enum { MAX_TYPES = 256, ARRAY_PREVIEW = 8, JSON_ARRAY_MAX = 64 };

typedef struct type_total {
    uint64_t tensors, elements, bytes;
} type_total;

typedef struct summary {
    type_total by_type[MAX_TYPES];
    uint64_t elements, bytes;
    const char *arch;
} summary;

static void summarize(const brigade_gguf *f, summary *s)
{
    memset(s, 0, sizeof *s);
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        type_total *tt = &s->by_type[t->type % MAX_TYPES];
        tt->tensors++;
        tt->elements += t->n_elements;
        tt->bytes += t->n_bytes;
        s->elements += t->n_elements;
        s->bytes += t->n_bytes;
    }
    const brigade_value *arch = brigade_gguf_get(f, "general.architecture");
    s->arch = arch && arch->type == BRIGADE_VALUE_STRING ? arch->as.str.ptr : NULL;
}

static double bits_per_weight(const summary *s)
{
    return s->elements ? 8.0 * (double)s->bytes / (double)s->elements : 0.0;
}

/* ------------------------------------------------------------------- text */

/* Prints a string with control characters escaped, cut at max bytes. */
static void print_escaped(FILE *out, const char *p, uint64_t len, uint64_t max)
{
    fputc('"', out);
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
    if (len > max)
        fprintf(out, "... (%llu bytes)", (unsigned long long)len);
}

static void print_number(FILE *out, brigade_value_type type, const void *p)
{
    switch (type) {
    case BRIGADE_VALUE_U8: fprintf(out, "%u", *(const uint8_t *)p); break;
    case BRIGADE_VALUE_I8: fprintf(out, "%d", *(const int8_t *)p); break;
    case BRIGADE_VALUE_U16: fprintf(out, "%u", *(const uint16_t *)p); break;
    case BRIGADE_VALUE_I16: fprintf(out, "%d", *(const int16_t *)p); break;
    case BRIGADE_VALUE_U32: fprintf(out, "%u", *(const uint32_t *)p); break;
    case BRIGADE_VALUE_I32: fprintf(out, "%d", *(const int32_t *)p); break;
    case BRIGADE_VALUE_U64: fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case BRIGADE_VALUE_I64: fprintf(out, "%lld", (long long)*(const int64_t *)p); break;
    case BRIGADE_VALUE_F32: fprintf(out, "%g", *(const float *)p); break;
    case BRIGADE_VALUE_F64: fprintf(out, "%g", *(const double *)p); break;
    case BRIGADE_VALUE_BOOL: fputs(*(const uint8_t *)p ? "true" : "false", out); break;
    default: break;
    }
}

static void print_value(FILE *out, const brigade_value *v)
{
    switch (v->type) {
    case BRIGADE_VALUE_STRING: print_escaped(out, v->as.str.ptr, v->as.str.len, 80); return;
    case BRIGADE_VALUE_ARRAY: {
        fprintf(out, "[%s x %llu]", brigade_value_type_name(v->elem_type),
                (unsigned long long)v->count);
        unsigned esize = brigade_value_type_size(v->elem_type);
        for (uint64_t i = 0; i < v->count && i < ARRAY_PREVIEW; i++) {
            fputs(i ? ", " : " ", out);
            if (esize)
                print_number(out, v->elem_type, (const uint8_t *)v->as.numbers + i * esize);
            else if (v->elem_type == BRIGADE_VALUE_STRING)
                print_escaped(out, v->as.strings[i].ptr, v->as.strings[i].len, 24);
            else
                print_value(out, &v->as.items[i]);
        }
        if (v->count > ARRAY_PREVIEW)
            fputs(", ...", out);
        return;
    }
    case BRIGADE_VALUE_F32: case BRIGADE_VALUE_F64: fprintf(out, "%g", v->as.f64); return;
    case BRIGADE_VALUE_BOOL: fputs(v->as.b ? "true" : "false", out); return;
    case BRIGADE_VALUE_I8: case BRIGADE_VALUE_I16: case BRIGADE_VALUE_I32: case BRIGADE_VALUE_I64:
        fprintf(out, "%lld", (long long)v->as.i64);
        return;
    default: fprintf(out, "%llu", (unsigned long long)v->as.u64); return;
    }
}

static void print_shape(FILE *out, const brigade_tensor_info *t, int width)
{
    char buf[96];
    int n = 0;
    for (uint32_t d = 0; d < t->n_dims; d++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%llu", d ? ", " : "[",
                      (unsigned long long)t->ne[d]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]");
    fprintf(out, "%-*s", width, buf);
}

/* A special token id with its text, or "-" if the key is absent. */
static void print_special(FILE *out, const brigade_gguf *f, const char *label, const char *key)
{
    uint32_t id = 0;
    if (!brigade_gguf_get(f, key) || brigade_gguf_get_u32(f, key, false, &id, NULL)) {
        fprintf(out, "  %-18s -\n", label);
        return;
    }
    fprintf(out, "  %-18s %u", label, id);
    const brigade_value *tokens = brigade_gguf_get(f, "tokenizer.ggml.tokens");
    if (tokens && tokens->type == BRIGADE_VALUE_ARRAY &&
        tokens->elem_type == BRIGADE_VALUE_STRING) {
        if (id < tokens->count) {
            fputc(' ', out);
            print_escaped(out, tokens->as.strings[id].ptr, tokens->as.strings[id].len, 40);
        } else {
            fprintf(out, " (beyond the %llu tokens!)", (unsigned long long)tokens->count);
        }
    }
    fputc('\n', out);
}

static const char *special_keys[][2] = {
    {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
    {"eot", "tokenizer.ggml.eot_token_id"},       {"pad", "tokenizer.ggml.padding_token_id"},
    {"unk", "tokenizer.ggml.unknown_token_id"},
};

static uint64_t array_count(const brigade_gguf *f, const char *key)
{
    const brigade_value *v = brigade_gguf_get(f, key);
    return v && v->type == BRIGADE_VALUE_ARRAY ? v->count : 0;
}

static void print_tokenizer(FILE *out, const brigade_gguf *f)
{
    const brigade_value *model = brigade_gguf_get(f, "tokenizer.ggml.model");
    if (!model) {
        fprintf(out, "\ntokenizer: none\n");
        return;
    }
    fprintf(out, "\ntokenizer:\n  %-18s ", "model");
    print_value(out, model);
    const brigade_value *pre = brigade_gguf_get(f, "tokenizer.ggml.pre");
    fprintf(out, "\n  %-18s ", "pre");
    if (pre)
        print_value(out, pre);
    else
        fputs("-", out);
    fprintf(out, "\n  %-18s %llu\n", "tokens",
            (unsigned long long)array_count(f, "tokenizer.ggml.tokens"));
    fprintf(out, "  %-18s %llu\n", "merges",
            (unsigned long long)array_count(f, "tokenizer.ggml.merges"));
    for (size_t i = 0; i < sizeof special_keys / sizeof *special_keys; i++)
        print_special(out, f, special_keys[i][0], special_keys[i][1]);
    const brigade_value *tmpl = brigade_gguf_get(f, "tokenizer.chat_template");
    if (tmpl && tmpl->type == BRIGADE_VALUE_STRING)
        fprintf(out, "  %-18s %llu bytes\n", "chat template", (unsigned long long)tmpl->as.str.len);
}

static void print_metadata(FILE *out, const brigade_gguf *f, const char *arch)
{
    size_t alen = arch ? strlen(arch) : 0;
    fprintf(out, "\nhyperparameters:\n");
    for (int64_t i = 0; i < brigade_gguf_kv_count(f); i++) {
        const char *key = brigade_gguf_kv_key(f, i);
        if (arch && strncmp(key, arch, alen) == 0 && key[alen] == '.') {
            fprintf(out, "  %-40s ", key + alen + 1);
            print_value(out, brigade_gguf_kv_value(f, i));
            fputc('\n', out);
        }
    }
    fprintf(out, "\nother metadata:\n");
    for (int64_t i = 0; i < brigade_gguf_kv_count(f); i++) {
        const char *key = brigade_gguf_kv_key(f, i);
        bool is_arch = arch && strncmp(key, arch, alen) == 0 && key[alen] == '.';
        if (!is_arch) {
            fprintf(out, "  %-40s ", key);
            print_value(out, brigade_gguf_kv_value(f, i));
            fputc('\n', out);
        }
    }
}

static void print_tensors(FILE *out, const brigade_gguf *f)
{
    fprintf(out, "\ntensors (%lld):\n  %-5s %-36s %-8s %-22s %14s %14s\n",
            (long long)brigade_gguf_tensor_count(f), "#", "name", "type", "shape", "bytes",
            "offset");
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        fprintf(out, "  %-5lld %-36s %-8s ", (long long)i, t->name, brigade_type_name(t->type));
        print_shape(out, t, 22);
        fprintf(out, " %14llu %14llu\n", (unsigned long long)t->n_bytes,
                (unsigned long long)t->offset);
    }
}

static void print_totals(FILE *out, const brigade_gguf *f, const summary *s)
{
    char a[32], b[32];
    fprintf(out, "\ntotals by type:\n  %-8s %8s %16s %16s %10s\n", "type", "tensors", "params",
            "bytes", "bpw");
    for (uint32_t t = 0; t < MAX_TYPES; t++) {
        const type_total *tt = &s->by_type[t];
        if (!tt->tensors)
            continue;
        fprintf(out, "  %-8s %8llu %16llu %16llu %10.4f\n", brigade_type_name(t),
                (unsigned long long)tt->tensors, (unsigned long long)tt->elements,
                (unsigned long long)tt->bytes, 8.0 * (double)tt->bytes / (double)tt->elements);
    }
    fprintf(out,
            "\nparams:     %llu (%.3f B)\n"
            "weights:    %llu bytes (%s), %.4f bits per weight\n"
            "file size:  %llu bytes (%s)\n",
            (unsigned long long)s->elements, (double)s->elements / 1e9,
            (unsigned long long)s->bytes, cli_format_bytes(s->bytes, a, sizeof a),
            bits_per_weight(s), (unsigned long long)brigade_gguf_file_size(f),
            cli_format_bytes(brigade_gguf_file_size(f), b, sizeof b));
}

static void print_text(FILE *out, const char *path, const brigade_gguf *f, const summary *s)
{
    fprintf(out, "file:         %s\n", path);
    fprintf(out, "format:       GGUF v%u, %lld metadata keys, %lld tensors, alignment %u, data at "
                 "byte %llu\n",
            brigade_gguf_version(f), (long long)brigade_gguf_kv_count(f),
            (long long)brigade_gguf_tensor_count(f), brigade_gguf_alignment(f),
            (unsigned long long)brigade_gguf_data_offset(f));
    fprintf(out, "architecture: %s\n", s->arch ? s->arch : "(none)");
    print_metadata(out, f, s->arch);
    print_tokenizer(out, f);
    print_tensors(out, f);
    print_totals(out, f, s);
}

/* ------------------------------------------------------------------- json */

static json_t *json_value(const brigade_value *v);

/* JSON strings must be UTF-8: bytes that are not become U+FFFD. */
static json_t *json_string_bytes(const char *p, uint64_t len)
{
    json_t *j = json_stringn(p, (size_t)len);
    if (j)
        return j;
    char *fixed = malloc((size_t)len * 3 + 1);
    if (!fixed)
        return json_null();
    size_t n = 0;
    for (uint64_t i = 0; i < len;) {
        unsigned char c = (unsigned char)p[i];
        unsigned need = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : 9;
        bool ok = need != 9;
        for (unsigned k = 1; ok && k <= need; k++)
            ok = i + k < len && ((unsigned char)p[i + k] >> 6) == 2;
        if (ok) {
            memcpy(fixed + n, p + i, need + 1);
            n += need + 1;
            i += need + 1;
        } else {
            memcpy(fixed + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        }
    }
    j = json_stringn(fixed, n);
    free(fixed);
    return j ? j : json_null();
}

static json_t *json_number_at(brigade_value_type type, const void *p)
{
    switch (type) {
    case BRIGADE_VALUE_U8: return json_integer(*(const uint8_t *)p);
    case BRIGADE_VALUE_I8: return json_integer(*(const int8_t *)p);
    case BRIGADE_VALUE_U16: return json_integer(*(const uint16_t *)p);
    case BRIGADE_VALUE_I16: return json_integer(*(const int16_t *)p);
    case BRIGADE_VALUE_U32: return json_integer(*(const uint32_t *)p);
    case BRIGADE_VALUE_I32: return json_integer(*(const int32_t *)p);
    case BRIGADE_VALUE_U64: return json_integer((json_int_t) * (const uint64_t *)p);
    case BRIGADE_VALUE_I64: return json_integer(*(const int64_t *)p);
    case BRIGADE_VALUE_F32: {
        double d = *(const float *)p;
        return isfinite(d) ? json_real(d) : json_null();
    }
    case BRIGADE_VALUE_F64: {
        double d = *(const double *)p;
        return isfinite(d) ? json_real(d) : json_null();
    }
    case BRIGADE_VALUE_BOOL: return json_boolean(*(const uint8_t *)p);
    default: return json_null();
    }
}

/* Arrays longer than JSON_ARRAY_MAX (token lists, merges) are summarized as
 * {"type": "array", "element_type": ..., "count": N}. */
static json_t *json_array_value(const brigade_value *v)
{
    if (v->count > JSON_ARRAY_MAX)
        return json_pack("{s:s, s:s, s:I}", "type", "array", "element_type",
                         brigade_value_type_name(v->elem_type), "count", (json_int_t)v->count);
    json_t *arr = json_array();
    unsigned esize = brigade_value_type_size(v->elem_type);
    for (uint64_t i = 0; i < v->count; i++) {
        json_t *item;
        if (esize)
            item = json_number_at(v->elem_type, (const uint8_t *)v->as.numbers + i * esize);
        else if (v->elem_type == BRIGADE_VALUE_STRING)
            item = json_string_bytes(v->as.strings[i].ptr, v->as.strings[i].len);
        else
            item = json_value(&v->as.items[i]);
        json_array_append_new(arr, item);
    }
    return arr;
}

static json_t *json_value(const brigade_value *v)
{
    switch (v->type) {
    case BRIGADE_VALUE_STRING: return json_string_bytes(v->as.str.ptr, v->as.str.len);
    case BRIGADE_VALUE_ARRAY: return json_array_value(v);
    case BRIGADE_VALUE_F32: case BRIGADE_VALUE_F64:
        return isfinite(v->as.f64) ? json_real(v->as.f64) : json_null();
    case BRIGADE_VALUE_BOOL: return json_boolean(v->as.b);
    case BRIGADE_VALUE_I8: case BRIGADE_VALUE_I16: case BRIGADE_VALUE_I32: case BRIGADE_VALUE_I64:
        return json_integer(v->as.i64);
    default: return json_integer((json_int_t)v->as.u64);
    }
}

static json_t *json_tokenizer(const brigade_gguf *f)
{
    const brigade_value *model = brigade_gguf_get(f, "tokenizer.ggml.model");
    if (!model)
        return json_null();
    const brigade_value *pre = brigade_gguf_get(f, "tokenizer.ggml.pre");
    json_t *t = json_object();
    json_object_set_new(t, "model", json_value(model));
    json_object_set_new(t, "pre", pre ? json_value(pre) : json_null());
    json_object_set_new(t, "n_tokens", json_integer((json_int_t)array_count(f, "tokenizer.ggml.tokens")));
    json_object_set_new(t, "n_merges", json_integer((json_int_t)array_count(f, "tokenizer.ggml.merges")));
    for (size_t i = 0; i < sizeof special_keys / sizeof *special_keys; i++) {
        uint32_t id;
        char name[32];
        snprintf(name, sizeof name, "%s_id", special_keys[i][0]);
        bool ok = brigade_gguf_get(f, special_keys[i][1]) &&
                  !brigade_gguf_get_u32(f, special_keys[i][1], false, &id, NULL);
        json_object_set_new(t, name, ok ? json_integer(id) : json_null());
    }
    return t;
}

static json_t *json_info(const char *path, const brigade_gguf *f, const summary *s)
{
    json_t *root = json_object();
    json_object_set_new(root, "file", json_string(path));
    json_object_set_new(root, "version", json_integer(brigade_gguf_version(f)));
    json_object_set_new(root, "file_size", json_integer((json_int_t)brigade_gguf_file_size(f)));
    json_object_set_new(root, "alignment", json_integer(brigade_gguf_alignment(f)));
    json_object_set_new(root, "data_offset", json_integer((json_int_t)brigade_gguf_data_offset(f)));
    json_object_set_new(root, "architecture", s->arch ? json_string(s->arch) : json_null());
    json_t *meta = json_object();
    for (int64_t i = 0; i < brigade_gguf_kv_count(f); i++)
        json_object_set_new(meta, brigade_gguf_kv_key(f, i), json_value(brigade_gguf_kv_value(f, i)));
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "tokenizer", json_tokenizer(f));
    json_t *tensors = json_array();
    for (int64_t i = 0; i < brigade_gguf_tensor_count(f); i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(f, i);
        json_t *shape = json_array();
        for (uint32_t d = 0; d < t->n_dims; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->ne[d]));
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "name", t->name,
                                                 "type", brigade_type_name(t->type), "shape", shape,
                                                 "elements", (json_int_t)t->n_elements, "bytes",
                                                 (json_int_t)t->n_bytes, "offset",
                                                 (json_int_t)t->offset));
    }
    json_object_set_new(root, "tensors", tensors);
    json_t *totals = json_array();
    for (uint32_t t = 0; t < MAX_TYPES; t++) {
        const type_total *tt = &s->by_type[t];
        if (tt->tensors)
            json_array_append_new(totals, json_pack("{s:s, s:I, s:I, s:I}", "type",
                                                    brigade_type_name(t), "tensors",
                                                    (json_int_t)tt->tensors, "params",
                                                    (json_int_t)tt->elements, "bytes",
                                                    (json_int_t)tt->bytes));
    }
    json_object_set_new(root, "totals_by_type", totals);
    json_object_set_new(root, "n_params", json_integer((json_int_t)s->elements));
    json_object_set_new(root, "weights_bytes", json_integer((json_int_t)s->bytes));
    json_object_set_new(root, "bits_per_weight", json_real(bits_per_weight(s)));
    return root;
}

/* ------------------------------------------------------------------- main */

static void read_progress(void *user, uint64_t done, uint64_t total)
{
    cli_progress_update(user, done, total);
}

static void info_usage(FILE *out)
{
    fprintf(out, "usage: brigade info MODEL.gguf [--json] [--no-mmap]\n");
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    bool as_json = false;
    brigade_gguf_options opts = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = true;
        else if (!strcmp(argv[i], "--no-mmap"))
            opts.no_mmap = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            info_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "info: unexpected argument '%s'\n", argv[i]);
            info_usage(stderr);
            return 2;
        } else
            path = argv[i];
    }
    if (!path) {
        info_usage(stderr);
        return 2;
    }
    cli_progress progress = {.label = "reading", .last_decile = -1};
    opts.progress = read_progress;
    opts.progress_user = &progress;
    brigade_gguf *f;
    brigade_error err = {0};
    brigade_status st = brigade_gguf_open(path, &opts, &f, &err);
    cli_progress_end(&progress);
    if (st != BRIGADE_OK) {
        fprintf(stderr, "info: %s\n", err.message);
        return 1;
    }
    summary *s = malloc(sizeof *s);
    if (!s) {
        brigade_gguf_close(f);
        fprintf(stderr, "info: out of memory\n");
        return 1;
    }
    summarize(f, s);
    int rc = 0;
    if (as_json) {
        json_t *root = json_info(path, f, s);
        if (!root || json_dumpf(root, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0) {
            fprintf(stderr, "info: cannot write JSON\n");
            rc = 1;
        }
        fputc('\n', stdout);
        json_decref(root);
    } else {
        print_text(stdout, path, f, s);
    }
    free(s);
    brigade_gguf_close(f);
    return rc;
}
