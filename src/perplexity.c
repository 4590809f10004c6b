/* Perplexity and KL divergence, as llama-perplexity computes them: window
 * evaluation, log-softmax sums, the packed log-probability rows of a base
 * model and llama.cpp's file that holds them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "error.h"

/* Log-probabilities this far below the largest are not kept in a row. */
#define LOGPROB_RANGE 16.0f
#define LOGPROB_STEPS 65535.0f

static const char LOGPROB_MAGIC[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
enum { LOGPROB_HEADER_BYTES = 8 + 3 * 4 };

uint32_t brigade_ppl_n_scored(uint32_t n_ctx)
{
    return n_ctx < 3 ? 0 : n_ctx - 1 - n_ctx / 2;
}

/* ------------------------------------------------------------- windows */

brigade_status brigade_ppl_eval_window(brigade_session *session, int32_t n_vocab,
                                       const int32_t *tokens, uint32_t n_ctx, int32_t bos,
                                       uint32_t n_batch, float *logits, brigade_error *err)
{
    if (n_ctx < 3)
        return bg_fail(err, BRIGADE_ERR_ARG, "a window of %u tokens scores none (at least 3)",
                       n_ctx);
    if (n_vocab <= 0 || !tokens || !logits)
        return bg_fail(err, BRIGADE_ERR_ARG, "a window needs tokens, rows for the logits and a "
                       "positive n_vocab (%d)", n_vocab);
    const uint32_t first = n_ctx / 2, n_eval = n_ctx - 1;
    if (n_eval > brigade_session_n_ctx(session))
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "a window of %u tokens needs a context of %u, the session has %u", n_ctx,
                       n_eval, brigade_session_n_ctx(session));
    if (n_batch == 0 || n_batch > n_eval)
        n_batch = n_eval;
    int32_t *head = NULL; /* the first piece, when its first token becomes BOS */
    brigade_status st = BRIGADE_OK;
    brigade_session_reset(session);
    for (uint32_t done = 0; done < n_eval && !st;) {
        uint32_t end = done < first ? first : n_eval;
        uint32_t k = end - done < n_batch ? end - done : n_batch;
        const int32_t *piece = tokens + done;
        if (done == 0 && bos >= 0 && tokens[0] != bos) {
            if (!(head = malloc((size_t)k * sizeof *head))) {
                st = bg_fail(err, BRIGADE_ERR_NOMEM, "cannot allocate %u tokens", k);
                break;
            }
            memcpy(head, tokens, (size_t)k * sizeof *head);
            head[0] = bos;
            piece = head;
        }
        float *dst = done >= first ? logits + (size_t)(done - first) * (size_t)n_vocab : NULL;
        st = brigade_session_eval(session, piece, k, dst != NULL, dst, err);
        done += k;
    }
    free(head);
    return st;
}

/* --------------------------------------------------------- log-softmax */

void brigade_log_softmax_of(const float *logits, int32_t n_vocab, brigade_log_softmax *out)
{
    float max = logits[0];
    int32_t argmax = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max) {
            max = logits[i];
            argmax = i;
        }
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += expf(logits[i] - max);
    *out = (brigade_log_softmax){.max = max, .log_sum_exp = log(sum), .argmax = argmax};
}

double brigade_ppl_add(brigade_ppl_stats *s, const float *logits, int32_t n_vocab, int32_t token)
{
    brigade_log_softmax ls;
    brigade_log_softmax_of(logits, n_vocab, &ls);
    double nll = (double)ls.max + ls.log_sum_exp - logits[token];
    s->sum_nll += nll;
    s->sum_nll2 += nll * nll;
    s->count++;
    return nll;
}

/* sum/count and the standard error of that mean; below min_count values
 * the error is 0 (too few to say). */
static brigade_estimate mean_of(double sum, double sum2, uint64_t count, uint64_t min_count)
{
    if (count == 0)
        return (brigade_estimate){0, 0};
    double mean = sum / (double)count;
    double var = sum2 / (double)count - mean * mean;
    double error = var > 0 && count >= min_count && count > 1 ? sqrt(var / (double)(count - 1)) : 0;
    return (brigade_estimate){mean, error};
}

brigade_estimate brigade_ppl_estimate(const brigade_ppl_stats *s)
{
    brigade_estimate nll = mean_of(s->sum_nll, s->sum_nll2, s->count, 2);
    double ppl = exp(nll.value);
    return (brigade_estimate){ppl, ppl * nll.error};
}

/* --------------------------------------------------------- packed rows */

size_t brigade_logprob_row_words(int32_t n_vocab)
{
    return 4 + 2 * (((size_t)n_vocab + 1) / 2);
}

void brigade_logprob_pack(const float *logits, int32_t n_vocab, uint16_t *row)
{
    brigade_log_softmax ls;
    brigade_log_softmax_of(logits, n_vocab, &ls);
    float lo = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        lo = logits[i] < lo ? logits[i] : lo;
    if (lo < ls.max - LOGPROB_RANGE)
        lo = ls.max - LOGPROB_RANGE;
    /* word w stands for the log-probability scale*w + min */
    const float lse = (float)ls.log_sum_exp;
    const float min = lo - ls.max - lse;
    const float scale = (ls.max - lo) / LOGPROB_STEPS;
    memcpy(row, &scale, sizeof scale);
    memcpy(row + 2, &min, sizeof min);
    uint16_t *w = row + 4;
    size_t n_words = brigade_logprob_row_words(n_vocab) - 4;
    memset(w, 0, n_words * sizeof *w);
    if (scale > 0) {
        const float inv = 1.0f / scale;
        for (int32_t i = 0; i < n_vocab; i++) {
            if (!(logits[i] > lo))
                continue;
            long q = lrintf(inv * (logits[i] - lo));
            w[i] = (uint16_t)(q > 65535 ? 65535 : q);
        }
    }
}

double brigade_kld_add(brigade_kld_stats *s, const float *logits, const uint16_t *base_row,
                       int32_t n_vocab, int32_t token, double *dp_out)
{
    brigade_log_softmax ls;
    brigade_log_softmax_of(logits, n_vocab, &ls);
    const double norm = (double)ls.max + ls.log_sum_exp; /* log p(i) = logits[i] - norm */
    float scale, min;
    memcpy(&scale, base_row, sizeof scale);
    memcpy(&min, base_row + 2, sizeof min);
    const uint16_t *w = base_row + 4;

    const double nll = norm - logits[token];
    const double nll_base = -(double)(scale * w[token] + min);
    double kld = 0;
    int32_t top_base = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (w[i] > w[top_base])
            top_base = i;
        const float lp_base = scale * w[i] + min;
        if (lp_base > -LOGPROB_RANGE)
            kld += exp((double)lp_base) * ((double)lp_base - (logits[i] - norm));
    }
    const double dp = exp(-nll) - exp(-nll_base);
    s->sum_nll += nll;
    s->sum_nll2 += nll * nll;
    s->sum_nll_base += nll_base;
    s->sum_nll_base2 += nll_base * nll_base;
    s->sum_nll_nll_base += nll * nll_base;
    s->sum_kld += kld;
    s->sum_kld2 += kld * kld;
    s->sum_dp += dp;
    s->sum_dp2 += dp * dp;
    s->sum_dp4 += dp * dp * dp * dp;
    if (fabs(dp) > s->max_abs_dp)
        s->max_abs_dp = fabs(dp);
    s->n_same_top += ls.argmax == top_base;
    s->count++;
    if (dp_out)
        *dp_out = dp;
    return kld;
}

void brigade_kld_summarize(const brigade_kld_stats *s, brigade_kld_summary *out)
{
    /* llama-perplexity gives errors only from more than 10 values */
    const uint64_t n = s->count, min_count = 11;
    brigade_estimate nll = mean_of(s->sum_nll, s->sum_nll2, n, min_count);
    brigade_estimate nll_base = mean_of(s->sum_nll_base, s->sum_nll_base2, n, min_count);
    double cov = 0;
    if (n >= 10)
        cov = (s->sum_nll_nll_base / (double)n - nll.value * nll_base.value) / (double)(n - 1);
    *out = (brigade_kld_summary){.count = n};
    out->ppl.value = exp(nll.value);
    out->ppl.error = out->ppl.value * nll.error;
    out->ppl_base.value = exp(nll_base.value);
    out->ppl_base.error = out->ppl_base.value * nll_base.error;
    double denom = nll.error * nll_base.error;
    out->ln_ppl_correlation = denom > 0 ? cov / denom : 0;
    double ratio_var = nll.error * nll.error + nll_base.error * nll_base.error - 2 * cov;
    out->ln_ppl_ratio.value = nll.value - nll_base.value;
    out->ln_ppl_ratio.error = ratio_var > 0 ? sqrt(ratio_var) : 0;
    out->ppl_ratio.value = exp(out->ln_ppl_ratio.value);
    out->ppl_ratio.error = out->ppl_ratio.value * out->ln_ppl_ratio.error;
    double diff_var = out->ppl.error * out->ppl.error +
                      out->ppl_base.error * out->ppl_base.error -
                      2 * out->ppl.value * out->ppl_base.value * cov;
    out->ppl_diff.value = out->ppl.value - out->ppl_base.value;
    out->ppl_diff.error = diff_var > 0 ? sqrt(diff_var) : 0;
    out->kld = mean_of(s->sum_kld, s->sum_kld2, n, min_count);
    out->dp = mean_of(s->sum_dp, s->sum_dp2, n, min_count);
    brigade_estimate mse = mean_of(s->sum_dp2, s->sum_dp4, n, min_count);
    out->dp_rms.value = sqrt(mse.value);
    out->dp_rms.error = out->dp_rms.value > 0 ? 0.5 / out->dp_rms.value * mse.error : 0;
    if (n > 0) {
        double top = (double)s->n_same_top / (double)n;
        out->same_top.value = top;
        out->same_top.error = n > 1 ? sqrt(top * (1 - top) / (double)(n - 1)) : 0;
    }
}

static int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The value at fraction of the way through n sorted values. */
static float quantile(const float *v, size_t n, double fraction)
{
    double p = fraction * (double)(n - 1);
    size_t i = (size_t)p;
    if (i >= n - 1)
        return v[n - 1];
    p -= (double)i;
    return (float)((1 - p) * v[i] + p * v[i + 1]);
}

void brigade_quantiles_of(float *values, size_t n, brigade_quantiles *out)
{
    *out = (brigade_quantiles){0};
    if (n == 0)
        return;
    qsort(values, n, sizeof *values, compare_floats);
    *out = (brigade_quantiles){
        .min = values[0],
        .p0_1 = quantile(values, n, 0.001),
        .p1 = quantile(values, n, 0.01),
        .p5 = quantile(values, n, 0.05),
        .p10 = quantile(values, n, 0.10),
        .p25 = quantile(values, n, 0.25),
        .median = quantile(values, n, 0.5),
        .p75 = quantile(values, n, 0.75),
        .p90 = quantile(values, n, 0.90),
        .p95 = quantile(values, n, 0.95),
        .p99 = quantile(values, n, 0.99),
        .p99_9 = quantile(values, n, 0.999),
        .max = values[n - 1],
    };
}

/* ------------------------------------------------ the log-probability file */

struct brigade_logprob_file {
    FILE *fp;
    char *path;
    bool writing;
    uint32_t n_ctx, n_chunk;
    int32_t n_vocab;
    int32_t *tokens;
    size_t row_words;
    uint64_t rows_total, rows_done;
    uint64_t offset; /* of the next row */
    uint16_t *row;   /* a row being packed (writing) */
};

static uint64_t rows_of(uint32_t n_ctx, uint32_t n_chunk)
{
    return (uint64_t)brigade_ppl_n_scored(n_ctx) * n_chunk;
}

static brigade_status file_new(const char *path, brigade_logprob_file **out, brigade_error *err)
{
    brigade_logprob_file *f = calloc(1, sizeof *f);
    size_t len = strlen(path);
    if (f && (f->path = malloc(len + 1)))
        memcpy(f->path, path, len + 1);
    if (!f || !f->path) {
        free(f);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: cannot allocate", path);
    }
    *out = f;
    return BRIGADE_OK;
}

static void file_free(brigade_logprob_file *f)
{
    if (f->fp)
        fclose(f->fp);
    free(f->tokens);
    free(f->row);
    free(f->path);
    free(f);
}

brigade_status brigade_logprob_create(const char *path, uint32_t n_ctx, int32_t n_vocab,
                                      uint32_t n_chunk, const int32_t *tokens,
                                      brigade_logprob_file **out, brigade_error *err)
{
    if (n_ctx < 3 || n_ctx > INT32_MAX || n_vocab <= 0 || n_chunk == 0 || n_chunk > INT32_MAX)
        return bg_fail(err, BRIGADE_ERR_ARG,
                       "%s: cannot hold n_ctx %u, n_vocab %d, n_chunk %u (n_ctx >= 3, others > 0)",
                       path, n_ctx, n_vocab, n_chunk);
    uint64_t n_tokens = (uint64_t)n_ctx * n_chunk;
    if (n_tokens > SIZE_MAX / sizeof(int32_t))
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: %llu tokens are too many", path,
                       (unsigned long long)n_tokens);
    for (uint64_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return bg_fail(err, BRIGADE_ERR_ARG, "%s: token %llu is %d, outside the vocabulary of %d",
                           path, (unsigned long long)i, tokens[i], n_vocab);
    brigade_logprob_file *f;
    brigade_status st = file_new(path, &f, err);
    if (st)
        return st;
    f->writing = true;
    f->n_ctx = n_ctx;
    f->n_vocab = n_vocab;
    f->n_chunk = n_chunk;
    f->row_words = brigade_logprob_row_words(n_vocab);
    f->rows_total = rows_of(n_ctx, n_chunk);
    f->tokens = malloc((size_t)n_tokens * sizeof *f->tokens);
    f->row = malloc(f->row_words * sizeof *f->row);
    if (!f->tokens || !f->row) {
        file_free(f);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: cannot allocate %llu tokens", path,
                       (unsigned long long)n_tokens);
    }
    memcpy(f->tokens, tokens, (size_t)n_tokens * sizeof *f->tokens);
    int32_t header[3] = {(int32_t)n_ctx, n_vocab, (int32_t)n_chunk};
    if (!(f->fp = fopen(path, "wb")) || fwrite(LOGPROB_MAGIC, 1, 8, f->fp) != 8 ||
        fwrite(header, sizeof header, 1, f->fp) != 1 ||
        fwrite(f->tokens, sizeof *f->tokens, (size_t)n_tokens, f->fp) != (size_t)n_tokens) {
        st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        file_free(f);
        return st;
    }
    f->offset = LOGPROB_HEADER_BYTES + n_tokens * sizeof(int32_t);
    *out = f;
    return BRIGADE_OK;
}

brigade_status brigade_logprob_write(brigade_logprob_file *f, const float *logits,
                                     brigade_error *err)
{
    if (!f->writing)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: opened for reading", f->path);
    if (f->rows_done == f->rows_total)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: all %llu rows are already written", f->path,
                       (unsigned long long)f->rows_total);
    brigade_logprob_pack(logits, f->n_vocab, f->row);
    if (fwrite(f->row, sizeof *f->row, f->row_words, f->fp) != f->row_words)
        return bg_fail(err, BRIGADE_ERR_IO, "%s: cannot write at byte %llu: %s", f->path,
                       (unsigned long long)f->offset, strerror(errno));
    f->offset += f->row_words * sizeof *f->row;
    f->rows_done++;
    return BRIGADE_OK;
}

/* Reads n bytes at the file's current offset, or says where it ended. */
static brigade_status read_at(brigade_logprob_file *f, void *dst, size_t n, const char *what,
                              brigade_error *err)
{
    if (fread(dst, 1, n, f->fp) != n)
        return bg_fail(err, ferror(f->fp) ? BRIGADE_ERR_IO : BRIGADE_ERR_FORMAT,
                       "%s: byte %llu: cannot read %s (%zu bytes): %s", f->path,
                       (unsigned long long)f->offset, what, n,
                       ferror(f->fp) ? strerror(errno) : "the file ends");
    f->offset += n;
    return BRIGADE_OK;
}

/* a*b, or false when it does not fit 64 bits */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b && a > UINT64_MAX / b)
        return false;
    *out = a * b;
    return true;
}

static brigade_status open_checked(brigade_logprob_file *f, brigade_error *err)
{
    const char *path = f->path;
    if (!(f->fp = fopen(path, "rb")))
        return bg_fail(err, BRIGADE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseeko(f->fp, 0, SEEK_END) != 0)
        return bg_fail(err, BRIGADE_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    off_t end = ftello(f->fp);
    if (end < 0 || fseeko(f->fp, 0, SEEK_SET) != 0)
        return bg_fail(err, BRIGADE_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    const uint64_t size = (uint64_t)end;
    char magic[8];
    int32_t header[3];
    brigade_status st = read_at(f, magic, sizeof magic, "the magic \"_logits_\"", err);
    if (st)
        return st;
    if (memcmp(magic, LOGPROB_MAGIC, sizeof magic) != 0)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "%s: byte 0: not a log-probability file (no \"_logits_\" magic)", path);
    static const char *const names[3] = {"n_ctx", "n_vocab", "n_chunk"};
    for (int i = 0; i < 3; i++)
        if ((st = read_at(f, &header[i], sizeof header[i], names[i], err)))
            return st;
    if (header[0] < 3)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "%s: byte 8: n_ctx %d is too small (a window needs 3 tokens)", path,
                       header[0]);
    if (header[1] <= 0)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: byte 12: n_vocab %d is not positive", path,
                       header[1]);
    if (header[2] <= 0)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: byte 16: n_chunk %d is not positive", path,
                       header[2]);
    f->n_ctx = (uint32_t)header[0];
    f->n_vocab = header[1];
    f->n_chunk = (uint32_t)header[2];
    f->row_words = brigade_logprob_row_words(f->n_vocab);
    f->rows_total = rows_of(f->n_ctx, f->n_chunk);
    /* The size the header implies, checked before anything is allocated. */
    uint64_t n_tokens = (uint64_t)f->n_ctx * f->n_chunk, token_bytes, row_bytes, rows_bytes;
    bool fits = mul_u64(n_tokens, sizeof(int32_t), &token_bytes) &&
                mul_u64(f->row_words, sizeof(uint16_t), &row_bytes) &&
                mul_u64(row_bytes, f->rows_total, &rows_bytes) &&
                rows_bytes <= UINT64_MAX - LOGPROB_HEADER_BYTES - token_bytes;
    uint64_t expected = fits ? LOGPROB_HEADER_BYTES + token_bytes + rows_bytes : 0;
    if (!fits || expected != size) {
        if (!fits)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: truncated at byte %llu: n_ctx %u, n_vocab %d and n_chunk %u need "
                           "more than 2^64 bytes",
                           path, (unsigned long long)size, f->n_ctx, f->n_vocab, f->n_chunk);
        if (expected > size)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: truncated at byte %llu: n_ctx %u, n_vocab %d and n_chunk %u need "
                           "%llu bytes",
                           path, (unsigned long long)size, f->n_ctx, f->n_vocab, f->n_chunk,
                           (unsigned long long)expected);
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "%s: byte %llu: %llu bytes follow the %llu that n_ctx %u, n_vocab %d and "
                       "n_chunk %u announce",
                       path, (unsigned long long)expected, (unsigned long long)(size - expected),
                       (unsigned long long)expected, f->n_ctx, f->n_vocab, f->n_chunk);
    }
    if (n_tokens > SIZE_MAX / sizeof(int32_t) || !(f->tokens = malloc((size_t)token_bytes)))
        return bg_fail(err, BRIGADE_ERR_NOMEM, "%s: cannot allocate %llu tokens", path,
                       (unsigned long long)n_tokens);
    if ((st = read_at(f, f->tokens, (size_t)token_bytes, "the tokens", err)))
        return st;
    for (uint64_t i = 0; i < n_tokens; i++)
        if (f->tokens[i] < 0 || f->tokens[i] >= f->n_vocab)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: byte %llu: token %llu is %d, outside the vocabulary of %d", path,
                           (unsigned long long)(LOGPROB_HEADER_BYTES + i * sizeof(int32_t)),
                           (unsigned long long)i, f->tokens[i], f->n_vocab);
    return BRIGADE_OK;
}

brigade_status brigade_logprob_open(const char *path, brigade_logprob_file **out,
                                    brigade_error *err)
{
    brigade_logprob_file *f;
    brigade_status st = file_new(path, &f, err);
    if (st)
        return st;
    if ((st = open_checked(f, err))) {
        file_free(f);
        return st;
    }
    *out = f;
    return BRIGADE_OK;
}

uint32_t brigade_logprob_n_ctx(const brigade_logprob_file *f) { return f->n_ctx; }
int32_t brigade_logprob_n_vocab(const brigade_logprob_file *f) { return f->n_vocab; }
uint32_t brigade_logprob_n_chunk(const brigade_logprob_file *f) { return f->n_chunk; }
const int32_t *brigade_logprob_tokens(const brigade_logprob_file *f) { return f->tokens; }

brigade_status brigade_logprob_read(brigade_logprob_file *f, uint16_t *row, brigade_error *err)
{
    if (f->writing)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: opened for writing", f->path);
    if (f->rows_done == f->rows_total)
        return bg_fail(err, BRIGADE_ERR_ARG, "%s: all %llu rows are already read", f->path,
                       (unsigned long long)f->rows_total);
    const uint64_t at = f->offset;
    brigade_status st = read_at(f, row, f->row_words * sizeof *row, "a row", err);
    if (st)
        return st;
    float scale, min;
    memcpy(&scale, row, sizeof scale);
    memcpy(&min, row + 2, sizeof min);
    /* The largest log-probability a row can stand for, -log sum exp, is
     * never above 0 (give or take rounding). */
    if (!isfinite(scale) || !isfinite(min) || scale < 0 || min > 0 ||
        (double)scale * LOGPROB_STEPS + min > 1e-3)
        return bg_fail(err, BRIGADE_ERR_FORMAT,
                       "%s: byte %llu: row %llu has scale %g and minimum %g, which are not "
                       "log-probabilities",
                       f->path, (unsigned long long)at, (unsigned long long)f->rows_done,
                       (double)scale, (double)min);
    f->rows_done++;
    return BRIGADE_OK;
}

brigade_status brigade_logprob_close(brigade_logprob_file *f, brigade_error *err)
{
    if (!f)
        return BRIGADE_OK;
    brigade_status st = BRIGADE_OK;
    if (f->writing) {
        FILE *fp = f->fp;
        f->fp = NULL;
        if (fclose(fp) != 0)
            st = bg_fail(err, BRIGADE_ERR_IO, "%s: cannot write: %s", f->path, strerror(errno));
        else if (f->rows_done != f->rows_total)
            st = bg_fail(err, BRIGADE_ERR_ARG, "%s: %llu of the %llu rows announced were written",
                         f->path, (unsigned long long)f->rows_done,
                         (unsigned long long)f->rows_total);
    }
    file_free(f);
    return st;
}
