/* Synthetic models: random weights with the exact geometry, tensor names and
 * metadata of a real model, and a real tokenizer copied from a vocabulary
 * file. Weights are drawn per row from a seed, so a file is reproducible and
 * independent of the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "gguf_writer.h"
#include "keys.h"
#include "arch.h"
#include "presets.h"
#include "quant.h"
#include "quant_mix.h"
#include "synth.h"
#include "types.h"

/* ------------------------------------------------------------------ random */

typedef struct rng {
    uint64_t state;
    double spare; /* Box-Muller makes normals in pairs */
    bool has_spare;
} rng;

static uint64_t splitmix64(rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): never 0, so log() is safe. */
static double uniform01(rng *r)
{
    return ((splitmix64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double gaussian(rng *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    double radius = sqrt(-2.0 * log(uniform01(r))), angle = 6.283185307179586 * uniform01(r);
    r->spare = radius * sin(angle);
    r->has_spare = true;
    return radius * cos(angle);
}

static uint64_t hash_str(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------ tensor plan */

typedef struct plan_tensor {
    bg_tensor_spec spec;
    uint32_t type;
} plan_tensor;

/* Matrices take the requested type (or llama.cpp's fallback for their row
 * length); everything else stays f32, as llama.cpp's quantizer leaves
 * norms, router and convolution. */
static uint32_t storage_type(const bg_tensor_spec *s, uint32_t want)
{
    return s->kind == BG_KIND_MATRIX ? bg_mix_fit_row(want, s->ne[0]) : BG_TYPE_F32;
}

static brigade_status apply_mix(const bg_hparams *hp, brigade_ftype ftype, plan_tensor *plan,
                                size_t n, brigade_error *err)
{
    bg_mix_tensor *mt = calloc(n, sizeof *mt);
    uint32_t *types = calloc(n, sizeof *types);
    brigade_status st = BRIGADE_OK;
    if (!mt || !types)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        mt[i] = (bg_mix_tensor){.name = plan[i].spec.name, .n_dims = plan[i].spec.n_dims,
                                .type = storage_type(&plan[i].spec, BG_TYPE_BF16)};
        memcpy(mt[i].ne, plan[i].spec.ne, sizeof mt[i].ne);
    }
    bg_mix_options mo = {.ftype = ftype, .output_type = -1, .token_embd_type = -1};
    if (!st)
        st = bg_mix_assign(mt, n, &(bg_mix_model){hp->n_layers, hp->n_expert, bg_hparams_gqa(hp)},
                           &mo, types, NULL, err);
    for (size_t i = 0; i < n && !st; i++)
        plan[i].type = types[i];
    free(mt);
    free(types);
    return st;
}

static brigade_status plan_model(const bg_hparams *hp, const brigade_synth_options *o,
                                 plan_tensor **out, size_t *n_out, brigade_error *err)
{
    size_t n = bg_arch_tensor_specs(hp, NULL, 0);
    bg_tensor_spec *specs = calloc(n, sizeof *specs);
    plan_tensor *plan = calloc(n, sizeof *plan);
    if (!specs || !plan) {
        free(specs);
        free(plan);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory");
    }
    bg_arch_tensor_specs(hp, specs, n);
    for (size_t i = 0; i < n; i++) {
        plan[i].spec = specs[i];
        plan[i].type = storage_type(&specs[i], o->type);
    }
    free(specs);
    brigade_status st = o->mix ? apply_mix(hp, o->ftype, plan, n, err) : BRIGADE_OK;
    if (st) {
        free(plan);
        return st;
    }
    *out = plan;
    *n_out = n;
    return BRIGADE_OK;
}

/* -------------------------------------------------------------- metadata */

/* llama.cpp's general.file_type for a model whose matrices are all `type`. */
static uint32_t file_type_of(uint32_t type)
{
    switch (type) {
    case BG_TYPE_F32: return 0;
    case BG_TYPE_F16: return 1;
    case BG_TYPE_Q4_0: return 2;
    case BG_TYPE_Q4_1: return 3;
    case BG_TYPE_Q8_0: return 7;
    case BG_TYPE_Q5_0: return 8;
    case BG_TYPE_Q5_1: return 9;
    case BG_TYPE_Q2_K: return 10;
    case BG_TYPE_Q3_K: return 11; /* Q3_K_S: every matrix Q3_K */
    case BG_TYPE_Q4_K: return 14; /* Q4_K_S: every matrix Q4_K */
    case BG_TYPE_Q5_K: return 16; /* Q5_K_S */
    case BG_TYPE_Q6_K: return 18;
    case BG_TYPE_IQ4_NL: return 25;
    case BG_TYPE_IQ4_XS: return 30;
    case BG_TYPE_BF16: return 32;
    default: return 0;
    }
}

static brigade_status write_metadata(bg_gguf_writer *w, const bg_preset *preset,
                                     const bg_hparams *hp, const brigade_synth_options *o,
                                     brigade_error *err)
{
    uint32_t file_type = o->mix ? (uint32_t)o->ftype : file_type_of(o->type);
    brigade_status st = bg_hparams_write(w, hp, err);
    if (!st) st = bg_gguf_set_str(w, KEY_NAME, preset->display_name, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_FILE_TYPE, file_type, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_QUANT_VERSION, 2, err);
    return st;
}

/* ------------------------------------------------------------- tokenizer */

/* GPT-2's byte-to-character map: printable bytes stand for themselves, the
 * rest are shifted to code points from 256 up. Writes UTF-8, returns length. */
static int byte_token(unsigned b, char *out)
{
    unsigned cp = b;
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    if (!printable) {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae)))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

enum { TOKEN_NORMAL = 1, TOKEN_CONTROL = 3 };

/* Writes tokens, types and (if given) scores, padded with control tokens
 * "[PADn]" up to n_vocab as llama.cpp's converter pads a vocabulary to the
 * embedding size. types may be NULL (all normal). */
static brigade_status write_token_arrays(bg_gguf_writer *w, const brigade_string *tokens,
                                         const int32_t *types, const float *scores,
                                         uint64_t n_have, uint32_t n_vocab, brigade_error *err)
{
    brigade_string *tok = calloc(n_vocab, sizeof *tok);
    int32_t *typ = calloc(n_vocab, sizeof *typ);
    float *sco = calloc(n_vocab, sizeof *sco);
    char *pad_names = calloc((size_t)(n_vocab - n_have) + 1, 16);
    brigade_status st = BRIGADE_OK;
    if (!tok || !typ || !sco || !pad_names) {
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory for %u tokens", n_vocab);
        goto done;
    }
    for (uint64_t i = 0; i < n_vocab; i++) {
        if (i < n_have) {
            tok[i] = tokens[i];
            typ[i] = types ? types[i] : TOKEN_NORMAL;
            sco[i] = scores ? scores[i] : 0;
        } else {
            char *name = pad_names + (i - n_have) * 16;
            int len = snprintf(name, 16, "[PAD%llu]", (unsigned long long)i);
            tok[i] = (brigade_string){name, (uint64_t)len};
            typ[i] = TOKEN_CONTROL;
        }
    }
    brigade_value tv = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                        .count = n_vocab, .as.strings = tok};
    st = bg_gguf_set(w, KEY_TOK_TOKENS, &tv, err);
    if (!st)
        st = bg_gguf_set_array(w, KEY_TOK_TYPES, BRIGADE_VALUE_I32, typ, n_vocab, err);
    if (!st && scores)
        st = bg_gguf_set_array(w, KEY_TOK_SCORES, BRIGADE_VALUE_F32, sco, n_vocab, err);
done:
    free(tok);
    free(typ);
    free(sco);
    free(pad_names);
    return st;
}

/* A small byte-level BPE vocabulary (all 256 bytes, a few merges, ChatML
 * control tokens) for models made without --vocab. */
static brigade_status builtin_vocab(bg_gguf_writer *w, uint32_t preset_vocab, uint32_t *n_vocab,
                                    brigade_error *err)
{
    static const char *const merges[] = {"Ġ t", "h e", "i n", "e r", "a n", "Ġ a", "o n",
                                         "r e", "Ġt he", "e n"};
    static const char *const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    enum { N_MERGES = sizeof merges / sizeof *merges, N_SPECIAL = 3 };
    enum { N = 256 + N_MERGES + N_SPECIAL };
    static char bytes_utf8[256][3];
    static char merged[N_MERGES][16];
    brigade_string tokens[N], merge_strs[N_MERGES];
    int32_t types[N];
    for (unsigned b = 0; b < 256; b++) {
        int len = byte_token(b, bytes_utf8[b]);
        tokens[b] = (brigade_string){bytes_utf8[b], (uint64_t)len};
        types[b] = TOKEN_NORMAL;
    }
    for (unsigned i = 0; i < N_MERGES; i++) {
        const char *m = merges[i];
        size_t k = 0;
        for (const char *c = m; *c && k < sizeof merged[i] - 1; c++)
            if (*c != ' ')
                merged[i][k++] = *c;
        merged[i][k] = 0;
        tokens[256 + i] = (brigade_string){merged[i], k};
        types[256 + i] = TOKEN_NORMAL;
        merge_strs[i] = (brigade_string){m, strlen(m)};
    }
    for (unsigned i = 0; i < N_SPECIAL; i++) {
        tokens[256 + N_MERGES + i] = (brigade_string){specials[i], strlen(specials[i])};
        types[256 + N_MERGES + i] = TOKEN_CONTROL;
    }
    brigade_value mer = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                         .count = N_MERGES, .as.strings = merge_strs};
    uint32_t eos = 256 + N_MERGES, eot = eos + 2;
    brigade_status st = bg_gguf_set_str(w, KEY_TOK_MODEL, "gpt2", err);
    if (!st) st = bg_gguf_set_str(w, KEY_TOK_PRE, "qwen2", err);
    *n_vocab = preset_vocab > N ? preset_vocab : N;
    if (!st) st = write_token_arrays(w, tokens, types, NULL, N, *n_vocab, err);
    if (!st) st = bg_gguf_set(w, KEY_TOK_MERGES, &mer, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_EOS, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_PAD, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_BOS, eos, err);
    if (!st) st = bg_gguf_set_u32(w, KEY_TOK_EOT, eot, err);
    if (!st) st = bg_gguf_set_bool(w, KEY_TOK_ADD_BOS, false, err);
    return st;
}

/* Every tokenizer.* key of the vocabulary file is copied. */
static brigade_status copy_vocab(bg_gguf_writer *w, const char *path, uint32_t preset_vocab,
                                 uint32_t *n_vocab, brigade_error *err)
{
    brigade_gguf *vocab;
    brigade_status st = brigade_gguf_open(path, NULL, &vocab, err);
    if (st)
        return st;
    const brigade_value *tokens = brigade_gguf_get(vocab, KEY_TOK_TOKENS);
    const brigade_value *types = brigade_gguf_get(vocab, KEY_TOK_TYPES);
    const brigade_value *scores = brigade_gguf_get(vocab, KEY_TOK_SCORES);
    if (!tokens) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT, "%s: no '%s' array: not a vocabulary file", path,
                     KEY_TOK_TOKENS);
    } else if ((types && types->elem_type != BRIGADE_VALUE_I32) ||
               (scores && scores->elem_type != BRIGADE_VALUE_F32)) {
        st = bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "%s: token types must be i32 and scores f32",
                     path);
    } else if ((types && types->count != tokens->count) ||
               (scores && scores->count != tokens->count)) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT,
                     "%s: %llu tokens but %llu token types and %llu scores", path,
                     (unsigned long long)tokens->count,
                     (unsigned long long)(types ? types->count : tokens->count),
                     (unsigned long long)(scores ? scores->count : tokens->count));
    } else if (preset_vocab && tokens->count > preset_vocab) {
        st = bg_fail(err, BRIGADE_ERR_ARG,
                     "%s: %llu tokens do not fit the preset's vocabulary of %u", path,
                     (unsigned long long)tokens->count, preset_vocab);
    } else if (tokens->count == 0 || tokens->count > UINT32_MAX / 2) {
        st = bg_fail(err, BRIGADE_ERR_FORMAT, "%s: unusable token count %llu", path,
                     (unsigned long long)tokens->count);
    }
    if (!st) {
        *n_vocab = preset_vocab ? preset_vocab : (uint32_t)tokens->count;
        for (int64_t i = 0; i < brigade_gguf_kv_count(vocab) && !st; i++) {
            const char *key = brigade_gguf_kv_key(vocab, i);
            if (strncmp(key, "tokenizer.", 10) == 0 && strcmp(key, KEY_TOK_TOKENS) != 0 &&
                strcmp(key, KEY_TOK_TYPES) != 0 && strcmp(key, KEY_TOK_SCORES) != 0)
                st = bg_gguf_set(w, key, brigade_gguf_kv_value(vocab, i), err);
        }
        if (!st)
            st = write_token_arrays(w, tokens->as.strings, types ? types->as.numbers : NULL,
                                    scores ? scores->as.numbers : NULL, tokens->count, *n_vocab,
                                    err);
    }
    brigade_gguf_close(vocab);
    return st;
}

/* ----------------------------------------------------------------- weights */

typedef struct fill_job {
    const plan_tensor *t;
    uint64_t seed;
    uint64_t row0, rows; /* the chunk being made */
    float *values;       /* rows * ne[0] */
    uint8_t *out;        /* quantized/converted bytes */
    uint64_t row_bytes;
    const bg_quant_ops *ops;
    unsigned worker, n_workers;
    /* Fast path (brigade_synth_options.fast): rows are assembled from
     * granules picked at random from a pool of drawn-and-quantized rows,
     * instead of drawing and quantizing every value. */
    const uint8_t *pool;
    uint64_t pool_granules, granule_bytes;
} fill_job;

/* Distributions that keep a random network's activations finite over many
 * layers: projections N(0, 1/fan_in), norms near one, and the DeltaNet decay
 * parameters drawn as the real models initialize them. */
static float draw(const bg_tensor_spec *s, rng *r)
{
    switch (s->role) {
    case BG_ROLE_SSM_A: return (float)-(1.0 + 15.0 * uniform01(r)); /* -exp(A_log), A in [1,16] */
    case BG_ROLE_SSM_DT: {
        /* the bias is softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1] */
        double dt = exp(log(1e-3) + uniform01(r) * (log(1e-1) - log(1e-3)));
        return (float)(dt + log(-expm1(-dt)));
    }
    case BG_ROLE_TOKEN_EMBD: return (float)gaussian(r);
    default: break;
    }
    if (s->kind == BG_KIND_NORM)
        return (float)(1.0 + 0.05 * gaussian(r));
    return (float)(gaussian(r) / sqrt((double)s->ne[0]));
}

/* Fast path: every granule (a block, or 64 values of an unblocked type) of a
 * row is a copy of one picked at random from the pool. The pool holds real
 * quantizations of the tensor's own distribution, so each block is valid
 * with sane scales, and rows are independent draws of granules. */
static void assemble_rows(const fill_job *job)
{
    uint64_t per_row = job->row_bytes / job->granule_bytes;
    for (uint64_t r = job->worker; r < job->rows; r += job->n_workers) {
        rng rng = {.state = job->seed ^ ((job->row0 + r) * 0xd1b54a32d192ed03ull)};
        uint8_t *row = job->out + r * job->row_bytes;
        for (uint64_t g = 0; g < per_row; g++) {
            uint64_t k = splitmix64(&rng) % job->pool_granules;
            memcpy(row + g * job->granule_bytes, job->pool + k * job->granule_bytes,
                   job->granule_bytes);
        }
    }
}

static void *fill_rows(void *arg)
{
    const fill_job *job = arg;
    if (job->pool) {
        assemble_rows(job);
        return NULL;
    }
    const bg_tensor_spec *s = &job->t->spec;
    uint64_t ne0 = s->ne[0];
    for (uint64_t r = job->worker; r < job->rows; r += job->n_workers) {
        rng rng = {.state = job->seed ^ ((job->row0 + r) * 0xd1b54a32d192ed03ull)};
        float *row = job->values + r * ne0;
        for (uint64_t i = 0; i < ne0; i++)
            row[i] = draw(s, &rng);
        if (job->ops)
            job->ops->quantize(row, job->out + r * job->row_bytes, (int64_t)ne0);
    }
    return NULL;
}

enum { MAX_WORKERS = 64 };

static unsigned worker_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (unsigned)n;
}

/* Chunks of rows are drawn and quantized in parallel, then streamed out. */
/* Runs fill_rows for rows [row0, row0 + n) of job's tensor on n_workers
 * threads (the caller's among them). */
static void run_fill(const fill_job *proto, uint64_t row0, uint64_t n, unsigned n_workers)
{
    fill_job jobs[MAX_WORKERS];
    pthread_t tids[MAX_WORKERS];
    bool started[MAX_WORKERS] = {false};
    for (unsigned k = 0; k < n_workers; k++) {
        jobs[k] = *proto;
        jobs[k].row0 = row0;
        jobs[k].rows = n;
        jobs[k].worker = k;
        jobs[k].n_workers = n_workers;
        if (k > 0)
            started[k] = pthread_create(&tids[k], NULL, fill_rows, &jobs[k]) == 0;
    }
    fill_rows(&jobs[0]);
    for (unsigned k = 1; k < n_workers; k++) {
        if (started[k])
            pthread_join(tids[k], NULL);
        else
            fill_rows(&jobs[k]); /* no thread: do its share here */
    }
}

/* About a million values per pool: 4096 Q4_K blocks, 32768 Q8_0 blocks. */
enum { POOL_ELEMS = 1u << 20 };

/* The fast path's pool for matrix t: whole rows drawn from a seed of their
 * own and quantized as usual, about POOL_ELEMS values or a quarter of the
 * tensor's rows, whichever is less. NULL (use the slow path) for tensors
 * under four rows and non-matrices, or if memory is short. */
static uint8_t *make_pool(const plan_tensor *t, uint64_t seed, uint64_t row_bytes,
                          const bg_quant_ops *ops, unsigned n_workers, uint64_t *granules,
                          uint64_t *granule_bytes)
{
    const bg_tensor_spec *s = &t->spec;
    const bg_type_info *ti = bg_type_get(t->type);
    uint64_t ne0 = s->ne[0], rows = s->ne[1] * s->ne[2] * s->ne[3];
    uint64_t pool_rows = (POOL_ELEMS + ne0 - 1) / ne0;
    if (pool_rows > rows / 4)
        pool_rows = rows / 4; /* small tensors: a quarter of their rows */
    if (s->kind != BG_KIND_MATRIX || !ti || pool_rows == 0)
        return NULL;
    uint64_t gel = ti->block_elems;
    if (gel < 64 && 64 % gel == 0 && ne0 % 64 == 0)
        gel = 64; /* f32, f16, bf16: 64 values at a time */
    float *values = malloc(pool_rows * ne0 * sizeof *values);
    uint8_t *pool = malloc(pool_rows * row_bytes);
    if (!values || !pool) {
        free(values);
        free(pool);
        return NULL;
    }
    fill_job proto = {.t = t, .seed = seed ^ 0x5bd1e9955bd1e995ull, .values = values,
                      .out = pool, .row_bytes = row_bytes, .ops = ops};
    run_fill(&proto, 0, pool_rows, n_workers);
    if (!ops)
        memcpy(pool, values, pool_rows * row_bytes);
    free(values);
    *granule_bytes = gel / ti->block_elems * ti->block_bytes;
    *granules = pool_rows * row_bytes / *granule_bytes;
    return pool;
}

static brigade_status write_tensor(bg_gguf_writer *w, const plan_tensor *t, uint64_t seed,
                                   float *values, uint8_t *out, uint64_t chunk_rows,
                                   const brigade_synth_options *o, uint64_t *done,
                                   uint64_t total, brigade_error *err)
{
    const bg_tensor_spec *s = &t->spec;
    uint64_t rows = s->ne[1] * s->ne[2] * s->ne[3], row_bytes = 0;
    bg_type_row_bytes((bg_type)t->type, s->ne[0], &row_bytes);
    const bg_quant_ops *ops = t->type == BG_TYPE_F32 ? NULL : bg_quant_ops_get((bg_type)t->type);
    if (t->type != BG_TYPE_F32 && (!ops || !ops->quantize))
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED, "synth: tensor '%s': no quantizer for %s",
                       s->name, brigade_type_name(t->type));
    uint64_t tseed = hash_str(s->name, seed * 0x9e3779b97f4a7c15ull + 1469598103934665603ull);
    unsigned n_workers = worker_count();
    uint64_t granules = 0, granule_bytes = 0;
    uint8_t *pool = o->fast ? make_pool(t, tseed, row_bytes, ops, n_workers, &granules,
                                        &granule_bytes)
                            : NULL;
    fill_job proto = {.t = t, .seed = tseed, .values = values, .out = out,
                      .row_bytes = row_bytes, .ops = ops, .pool = pool,
                      .pool_granules = granules, .granule_bytes = granule_bytes};
    brigade_status st = BRIGADE_OK;
    for (uint64_t row0 = 0; row0 < rows && !st; row0 += chunk_rows) {
        uint64_t n = rows - row0 < chunk_rows ? rows - row0 : chunk_rows;
        run_fill(&proto, row0, n, n_workers);
        const void *bytes = ops || pool ? (const void *)out : (const void *)values;
        st = bg_gguf_writer_data(w, bytes, n * row_bytes, err);
        if (st)
            break;
        *done += n * row_bytes;
        if (o->progress)
            o->progress(o->progress_user, *done, total);
    }
    free(pool);
    return st;
}

static brigade_status write_weights(bg_gguf_writer *w, const plan_tensor *plan, size_t n,
                                    const brigade_synth_options *o, brigade_error *err)
{
    uint64_t max_ne0 = 0, total = 0, done = 0;
    for (size_t i = 0; i < n; i++) {
        if (plan[i].spec.ne[0] > max_ne0)
            max_ne0 = plan[i].spec.ne[0];
        total += bg_gguf_writer_tensor_bytes(w, (int64_t)i);
    }
    /* About 32 MiB of floats per chunk, at least one row. */
    uint64_t chunk_rows = (32u << 20) / (max_ne0 * sizeof(float));
    if (chunk_rows == 0)
        chunk_rows = 1;
    float *values = malloc(chunk_rows * max_ne0 * sizeof *values);
    uint8_t *out = malloc(chunk_rows * max_ne0 * sizeof *values);
    brigade_status st = BRIGADE_OK;
    if (!values || !out)
        st = bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory for work buffers");
    for (size_t i = 0; i < n && !st; i++)
        st = write_tensor(w, &plan[i], o->seed, values, out, chunk_rows, o, &done, total, err);
    free(values);
    free(out);
    return st;
}

/* -------------------------------------------------------------------- main */

static brigade_status check_options(const brigade_synth_options *o, const bg_preset **preset,
                                    brigade_error *err)
{
    if (!o || !o->preset)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: no preset given");
    *preset = bg_preset_find(o->preset);
    if (!*preset) {
        char known[512] = "";
        for (const char *const *p = brigade_synth_presets(); *p; p++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                     p == brigade_synth_presets() ? "" : ", ", *p);
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: unknown preset '%s' (known: %s)", o->preset,
                       known);
    }
    const bg_type_info *ti = bg_type_get(o->type);
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)o->type);
    bool is_weight_type = o->type == BG_TYPE_F32 || (ops && ops->quantize && ops->dot);
    if (o->mix && !brigade_ftype_name(o->ftype))
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: unsupported file type %d", (int)o->ftype);
    if (!o->mix && (!ti || !is_weight_type))
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "synth: type '%s' cannot be used for weights (use f32, f16, bf16, q8_0, "
                       "q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl or iq4_xs)",
                       ti ? ti->name : "unknown");
    const bg_hparams *hp = &(*preset)->hp;
    uint32_t n_layers = o->n_layers ? o->n_layers : hp->n_layers;
    if (n_layers > BG_MAX_LAYERS)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: %u layers is more than %u", n_layers,
                       BG_MAX_LAYERS);
    if (hp->arch == BG_ARCH_QWEN35MOE && n_layers < hp->full_attention_interval)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "synth: %s needs at least %u layers (one full-attention layer)",
                       o->preset, hp->full_attention_interval);
    if (o->n_experts_used > hp->n_expert)
        return bg_fail(err, BRIGADE_ERR_ARG, "synth: %u experts used, but the model has %u",
                       o->n_experts_used, hp->n_expert);
    return BRIGADE_OK;
}

/* Metadata, tokenizer and tensor directory of the model o describes. */
static brigade_status build(const brigade_synth_options *o, bg_gguf_writer **w_out,
                            plan_tensor **plan_out, size_t *n_out, brigade_error *err)
{
    const bg_preset *preset = NULL;
    brigade_status st = check_options(o, &preset, err);
    if (st)
        return st;
    bg_hparams hp = preset->hp;
    if (o->n_layers)
        hp.n_layers = o->n_layers;
    if (o->n_experts_used)
        hp.n_expert_used = o->n_experts_used;
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    if (!w)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "synth: out of memory");
    plan_tensor *plan = NULL;
    size_t n = 0;
    st = write_metadata(w, preset, &hp, o, err);
    if (!st)
        st = o->vocab_path ? copy_vocab(w, o->vocab_path, preset->hp.n_vocab, &hp.n_vocab, err)
                           : builtin_vocab(w, preset->hp.n_vocab, &hp.n_vocab, err);
    if (!st)
        st = bg_hparams_check(&hp, err);
    if (!st)
        st = plan_model(&hp, o, &plan, &n, err);
    for (size_t i = 0; i < n && !st; i++)
        st = bg_gguf_add_tensor(w, plan[i].spec.name, plan[i].type, plan[i].spec.n_dims,
                                plan[i].spec.ne, err);
    if (st) {
        free(plan);
        bg_gguf_writer_free(w);
        return st;
    }
    *w_out = w;
    *plan_out = plan;
    *n_out = n;
    return BRIGADE_OK;
}

brigade_status bg_synth_header(const brigade_synth_options *o, uint8_t **header, size_t *len,
                               uint64_t *file_size, brigade_error *err)
{
    bg_gguf_writer *w;
    plan_tensor *plan;
    size_t n;
    brigade_status st = build(o, &w, &plan, &n, err);
    if (st)
        return st;
    *file_size = bg_gguf_writer_file_size(w);
    st = bg_gguf_writer_header(w, header, len, err);
    free(plan);
    bg_gguf_writer_free(w);
    return st;
}

brigade_status brigade_synth(const char *out_path, const brigade_synth_options *o,
                             brigade_error *err)
{
    bg_gguf_writer *w;
    plan_tensor *plan;
    size_t n;
    brigade_status st = build(o, &w, &plan, &n, err);
    if (st)
        return st;
    st = bg_gguf_writer_begin(w, out_path, err);
    for (size_t i = 0; o->sparse && i < n && !st; i++)
        st = bg_gguf_writer_skip(w, bg_gguf_writer_tensor_bytes(w, (int64_t)i), err);
    if (!st && !o->sparse)
        st = write_weights(w, plan, n, o, err);
    if (!st)
        st = bg_gguf_writer_finish(w, err);
    free(plan);
    bg_gguf_writer_free(w);
    if (st)
        remove(out_path);
    return st;
}
