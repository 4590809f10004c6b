/* brigade_quantize: a GGUF file rewritten with the tensor types of a
 * llama.cpp file type. Tensors stream from the mapped input through a
 * bounded work buffer, rows quantized in parallel, into OUT.partial, which
 * becomes OUT only once complete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "gguf_writer.h"
#include "hparams.h"
#include "keys.h"
#include "pool.h"
#include "quant.h"
#include "quant_mix.h"
#include "types.h"

/* Rows go through float in slabs of about this many bytes. */
#define SLAB_FLOATS (16u << 20)

typedef struct tensor_job {
    const brigade_tensor_info *t;
    const bg_quant_ops *from, *to; /* to NULL: copy the bytes as they are */
    uint32_t to_type;
} tensor_job;

typedef struct slab {
    const tensor_job *job;
    const uint8_t *src;
    uint8_t *dst;
    float *work; /* one row of floats per worker */
    uint64_t row_in, row_out, ne0;
    int64_t rows;
    unsigned rows_per_task;
} slab;

static void convert_rows(void *ctx, int64_t task, unsigned worker)
{
    const slab *s = ctx;
    float *row = s->work + (uint64_t)worker * s->ne0;
    int64_t first = task * s->rows_per_task;
    int64_t last = first + s->rows_per_task < s->rows ? first + s->rows_per_task : s->rows;
    for (int64_t r = first; r < last; r++) {
        s->job->from->dequantize(s->src + (uint64_t)r * s->row_in, row, (int64_t)s->ne0);
        s->job->to->quantize(row, s->dst + (uint64_t)r * s->row_out, (int64_t)s->ne0);
    }
}

typedef struct run {
    const brigade_quantize_options *o;
    bg_gguf_writer *w;
    bg_pool *pool;
    float *work;
    uint8_t *out;
    uint64_t out_cap;
    brigade_quantize_progress p;
} run;

static bool report_progress(run *r)
{
    return !r->o->progress || r->o->progress(r->o->progress_user, &r->p);
}

static brigade_status write_tensor(run *r, const tensor_job *job, brigade_error *err)
{
    const brigade_tensor_info *t = job->t;
    const uint8_t *data = t->data;
    if (!job->to) {
        /* same type: the bytes go through unchanged, in slabs */
        for (uint64_t off = 0; off < t->n_bytes;) {
            uint64_t n = t->n_bytes - off < r->out_cap ? t->n_bytes - off : r->out_cap;
            brigade_status st = bg_gguf_writer_data(r->w, data + off, n, err);
            if (st)
                return st;
            off += n;
            r->p.bytes_done += n;
            if (!report_progress(r))
                return bg_fail(err, BRIGADE_ERR_CANCELLED, "quantize: cancelled");
        }
        return BRIGADE_OK;
    }
    uint64_t ne0 = t->ne[0], row_in, row_out;
    bg_type_row_bytes((bg_type)t->type, ne0, &row_in);
    bg_type_row_bytes((bg_type)job->to_type, ne0, &row_out);
    uint64_t rows = t->n_bytes / row_in;
    uint64_t slab_rows = r->out_cap / (row_out > ne0 * 4 ? row_out : ne0 * 4);
    if (slab_rows == 0)
        slab_rows = 1;
    unsigned threads = bg_pool_threads(r->pool);
    for (uint64_t row0 = 0; row0 < rows; row0 += slab_rows) {
        int64_t n = (int64_t)(rows - row0 < slab_rows ? rows - row0 : slab_rows);
        unsigned per_task = (unsigned)((n + threads * 4 - 1) / (threads * 4));
        slab s = {job, data + row0 * row_in, r->out, r->work, row_in, row_out, ne0, n,
                  per_task ? per_task : 1};
        bg_pool_run(r->pool, (n + s.rows_per_task - 1) / s.rows_per_task, convert_rows, &s);
        brigade_status st = bg_gguf_writer_data(r->w, r->out, (uint64_t)n * row_out, err);
        if (st)
            return st;
        r->p.bytes_done += (uint64_t)n * row_in;
        if (!report_progress(r))
            return bg_fail(err, BRIGADE_ERR_CANCELLED, "quantize: cancelled");
    }
    return BRIGADE_OK;
}

/* The writer's metadata: the input's, with the new file type. */
static brigade_status copy_metadata(const brigade_gguf *in, bg_gguf_writer *w,
                                    brigade_ftype ftype, brigade_error *err)
{
    brigade_status st = BRIGADE_OK;
    for (int64_t i = 0; i < brigade_gguf_kv_count(in) && !st; i++) {
        const char *key = brigade_gguf_kv_key(in, i);
        if (strcmp(key, "general.alignment") != 0) /* the writer's own */
            st = bg_gguf_set(w, key, brigade_gguf_kv_value(in, i), err);
    }
    if (!st)
        st = bg_gguf_set_u32(w, KEY_QUANT_VERSION, 2, err);
    if (!st)
        st = bg_gguf_set_u32(w, KEY_FILE_TYPE, (uint32_t)ftype, err);
    return st;
}

/* The target type of every tensor, what converting to it needs, and the
 * order to write them in (llama.cpp's: outside the blocks first, then
 * block by block). */
static brigade_status plan_jobs(const brigade_gguf *in, const char *path,
                                const brigade_quantize_options *o, tensor_job *jobs,
                                size_t *order, brigade_quantize_report *rep, brigade_error *err)
{
    bg_hparams hp;
    brigade_status st = bg_hparams_read(in, &hp, err);
    if (st) {
        bg_error_prefix(err, "%s: ", path);
        return st;
    }
    int64_t n = brigade_gguf_tensor_count(in);
    bg_mix_tensor *mt = calloc((size_t)(n ? n : 1), sizeof *mt);
    uint32_t *types = calloc((size_t)(n ? n : 1), sizeof *types);
    if (!mt || !types)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "quantize: out of memory");
    for (int64_t i = 0; i < n && !st; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(in, i);
        mt[i] = (bg_mix_tensor){.name = t->name, .n_dims = t->n_dims, .type = t->type};
        memcpy(mt[i].ne, t->ne, sizeof mt[i].ne);
    }
    bg_mix_options mo = {o->ftype, o->pure, o->output_type, o->token_embd_type};
    if (!st)
        st = bg_mix_assign(mt, (size_t)n, &(bg_mix_model){hp.n_layers, hp.n_expert, bg_hparams_gqa(&hp)},
                           &mo, types, &rep->n_fallback, err);
    if (!st && !bg_mix_order(mt, (size_t)n, order))
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "quantize: out of memory");
    for (int64_t i = 0; i < n && !st; i++) {
        const brigade_tensor_info *t = brigade_gguf_tensor(in, i);
        jobs[i] = (tensor_job){.t = t, .to_type = types[i]};
        rep->n_params += t->n_elements;
        rep->bytes_in += t->n_bytes;
        if (types[i] == t->type)
            continue;
        jobs[i].from = bg_quant_ops_get((bg_type)t->type);
        jobs[i].to = bg_quant_ops_get((bg_type)types[i]);
        bool quantized_in = t->type != BG_TYPE_F32 && t->type != BG_TYPE_F16 &&
                            t->type != BG_TYPE_BF16;
        uint64_t bytes;
        if (quantized_in && !o->allow_requantize)
            st = bg_fail(err, BRIGADE_ERR_ARG,
                         "%s: tensor '%s' is already %s; requantizing to %s loses quality "
                         "(--allow-requantize to do it anyway)",
                         path, t->name, brigade_type_name(t->type), brigade_type_name(types[i]));
        else if (!jobs[i].from || !jobs[i].from->dequantize)
            st = bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "%s: tensor '%s': cannot read type %s",
                         path, t->name, brigade_type_name(t->type));
        else if (!jobs[i].to || !jobs[i].to->quantize)
            st = bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "%s: tensor '%s': cannot write type %s",
                         path, t->name, brigade_type_name(types[i]));
        else if (!bg_type_row_bytes((bg_type)types[i], t->ne[0], &bytes))
            st = bg_fail(err, BRIGADE_ERR_ARG,
                         "%s: tensor '%s': rows of %llu elements do not fit %s blocks", path,
                         t->name, (unsigned long long)t->ne[0], brigade_type_name(types[i]));
        rep->n_quantized++;
        rep->n_requantized += quantized_in;
    }
    free(mt);
    free(types);
    return st;
}

static brigade_status quantize_file(const brigade_gguf *in, const char *in_path,
                                    const char *tmp_path, const brigade_quantize_options *o,
                                    brigade_quantize_report *rep, brigade_error *err)
{
    int64_t n = brigade_gguf_tensor_count(in);
    tensor_job *jobs = calloc((size_t)(n ? n : 1), sizeof *jobs);
    size_t *order = calloc((size_t)(n ? n : 1), sizeof *order);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads = o->n_threads ? o->n_threads : (cores > 0 ? (unsigned)cores : 1);
    run r = {.o = o, .pool = bg_pool_acquire(threads), .out_cap = SLAB_FLOATS * sizeof(float)};
    r.out = malloc(r.out_cap);
    uint64_t max_ne0 = 1;
    for (int64_t i = 0; i < n; i++)
        if (brigade_gguf_tensor(in, i)->ne[0] > max_ne0)
            max_ne0 = brigade_gguf_tensor(in, i)->ne[0];
    r.work = malloc(max_ne0 * threads * sizeof(float));
    r.w = bg_gguf_writer_new(brigade_gguf_alignment(in));
    brigade_status st = BRIGADE_OK;
    if (!jobs || !order || !r.pool || !r.out || !r.work || !r.w)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "quantize: out of memory");
    if (!st)
        st = plan_jobs(in, in_path, o, jobs, order, rep, err);
    if (!st)
        st = copy_metadata(in, r.w, o->ftype, err);
    for (int64_t k = 0; k < n && !st; k++) {
        const brigade_tensor_info *t = jobs[order[k]].t;
        st = bg_gguf_add_tensor(r.w, t->name, jobs[order[k]].to_type, t->n_dims, t->ne, err);
    }
    if (!st)
        st = bg_gguf_writer_begin(r.w, tmp_path, err);
    r.p = (brigade_quantize_progress){.n_tensors = n, .bytes_total = rep->bytes_in};
    for (int64_t k = 0; k < n && !st; k++) {
        const tensor_job *job = &jobs[order[k]];
        r.p.tensor = k;
        r.p.name = job->t->name;
        r.p.from_type = job->t->type;
        r.p.to_type = job->to_type;
        if (!report_progress(&r))
            st = bg_fail(err, BRIGADE_ERR_CANCELLED, "quantize: cancelled");
        if (!st)
            st = write_tensor(&r, job, err);
        if (!st)
            rep->bytes_out += bg_gguf_writer_tensor_bytes(r.w, k);
    }
    if (!st)
        st = bg_gguf_writer_finish(r.w, err);
    rep->n_tensors = n;
    bg_gguf_writer_free(r.w);
    bg_pool_release(r.pool);
    free(r.out);
    free(r.work);
    free(jobs);
    free(order);
    return st;
}

brigade_status brigade_quantize(const char *in_path, const char *out_path,
                                const brigade_quantize_options *o,
                                brigade_quantize_report *report, brigade_error *err)
{
    brigade_quantize_report rep = {0};
    if (report)
        *report = rep;
    if (!brigade_ftype_name(o->ftype))
        return bg_fail(err, BRIGADE_ERR_ARG, "quantize: unsupported file type %d", (int)o->ftype);
    if (strcmp(in_path, out_path) == 0)
        return bg_fail(err, BRIGADE_ERR_ARG, "quantize: the output would overwrite the input %s",
                       in_path);
    brigade_gguf *in = NULL;
    brigade_status st = brigade_gguf_open(in_path, NULL, &in, err);
    if (st)
        return st;
    size_t len = strlen(out_path) + sizeof ".partial";
    char *tmp = malloc(len);
    if (!tmp) {
        brigade_gguf_close(in);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "quantize: out of memory");
    }
    snprintf(tmp, len, "%s.partial", out_path);
    st = quantize_file(in, in_path, tmp, o, &rep, err);
    if (!st && rename(tmp, out_path) != 0)
        st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot rename to %s", tmp, out_path);
    if (st)
        remove(tmp);
    free(tmp);
    brigade_gguf_close(in);
    if (report)
        *report = rep;
    return st;
}
