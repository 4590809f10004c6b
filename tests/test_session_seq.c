/* Several sequences in one session: tokens of three sequences interleaved
 * in batches (split into micro-batches across sequence boundaries) give the
 * logits each sequence gives evaluated alone; a checkpoint restored and
 * continued gives what evaluating from scratch gives; cutting a sequence
 * back works where the state allows it and is refused where it does not;
 * the memory plan scales with the number of sequences. f32 weights, so the
 * comparison is tight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"

enum { N_SEQ = 3, MAX_LEN = 12 };

static const int32_t seqs[N_SEQ][MAX_LEN] = {
    {5, 17, 99, 3, 250, 41, 7, 8, 200, 13, 77, 1},
    {42, 42, 42, 9, 100, 128, 64, 31, 2, 5, 6, 7},
    {255, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
};
static const size_t lens[N_SEQ] = {12, 7, 10};

/* max |a - b| relative to max |b| */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static float *eval_alone(brigade_model *m, const int32_t *tokens, size_t n, uint32_t n_vocab)
{
    brigade_session *s = NULL;
    brigade_error err;
    float *out = malloc(n * n_vocab * sizeof(float));
    brigade_session_options so = {.n_ctx = 32, .n_threads = 2, .n_ubatch = 5};
    bool ok = out && brigade_session_new(m, &so, &s, &err) == BRIGADE_OK &&
              brigade_session_eval(s, tokens, n, true, out, &err) == BRIGADE_OK;
    CHECK(ok, "single-sequence evaluation: %s", err.message);
    brigade_session_free(s);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

static void check_model(const char *path, const char *what, bool recurrent)
{
    brigade_model *m = NULL;
    brigade_error err = {0};
    if (brigade_model_load(path, NULL, &m, &err)) {
        CHECK(false, "%s: %s", what, err.message);
        return;
    }
    const uint32_t V = brigade_model_n_vocab(m);
    float *ref[N_SEQ];
    for (int q = 0; q < N_SEQ; q++)
        ref[q] = eval_alone(m, seqs[q], lens[q], V);

    /* Interleaved: each step takes up to 4 tokens of every sequence still
     * going, in rotating order; micro-batches of 5 cut across sequences. */
    brigade_session *s = NULL;
    brigade_session_options so = {.n_ctx = 32, .n_threads = 2, .n_ubatch = 5, .n_seq_max = N_SEQ};
    CHECK(brigade_session_new(m, &so, &s, &err) == BRIGADE_OK, "%s: %s", what, err.message);
    float *logits = malloc(N_SEQ * MAX_LEN * (size_t)V * sizeof(float));
    size_t done[N_SEQ] = {0};
    double worst = 0;
    for (int step = 0; s && logits; step++) {
        int32_t tok[N_SEQ * 4];
        uint32_t sq[N_SEQ * 4];
        bool want[N_SEQ * 4];
        size_t pos[N_SEQ * 4], n = 0;
        for (int r = 0; r < N_SEQ; r++) {
            int q = (r + step) % N_SEQ;
            for (int k = 0; k < 4 && done[q] < lens[q]; k++, done[q]++) {
                tok[n] = seqs[q][done[q]];
                sq[n] = (uint32_t)q;
                want[n] = (done[q] + step) % 2 == 0 || done[q] + 1 == lens[q];
                pos[n++] = done[q];
            }
        }
        if (!n)
            break;
        brigade_batch b = {.tokens = tok, .seq = sq, .logits = want, .n = n};
        if (brigade_session_eval_batch(s, &b, logits, &err)) {
            CHECK(false, "%s: batch: %s", what, err.message);
            break;
        }
        size_t row = 0;
        for (size_t i = 0; i < n; i++) {
            if (!want[i])
                continue;
            if (ref[sq[i]])
                worst = fmax(worst, rel_diff(logits + row * V, ref[sq[i]] + pos[i] * V, V));
            row++;
        }
    }
    CHECK(worst <= 1e-6, "%s: batched logits differ from single-sequence ones by %g", what, worst);
    for (int q = 0; s && q < N_SEQ; q++)
        CHECK(brigade_session_seq_n_past(s, (uint32_t)q) == lens[q], "%s: sequence %d holds %u",
              what, q, brigade_session_seq_n_past(s, (uint32_t)q));
    printf("  %s: batched vs alone, max relative difference %.3g\n", what, worst);

    /* Errors leave the session as it was. */
    if (s) {
        uint32_t bad_seq[1] = {N_SEQ};
        int32_t t1[1] = {1};
        brigade_batch b = {.tokens = t1, .seq = bad_seq, .n = 1};
        CHECK(brigade_session_eval_batch(s, &b, NULL, &err) == BRIGADE_ERR_ARG &&
                  strstr(err.message, "sequence 3"),
              "%s: sequence out of range: %s", what, err.message);
        int32_t many[32] = {0};
        uint32_t zeros[32] = {0};
        b = (brigade_batch){.tokens = many, .seq = zeros, .n = 32};
        CHECK(brigade_session_eval_batch(s, &b, NULL, &err) == BRIGADE_ERR_ARG &&
                  strstr(err.message, "do not fit"),
              "%s: overflow: %s", what, err.message);
        CHECK(brigade_session_seq_n_past(s, 0) == lens[0], "%s: a refused batch changed the session",
              what);
    }

    /* Checkpoint: sequence 1 takes 5 tokens of A, saves, goes on with other
     * tokens, is restored and continues with the rest of A: the logits are
     * A's from scratch. */
    uint64_t cb = s ? brigade_session_checkpoint_bytes(s) : 0;
    CHECK(recurrent ? cb > 0 : cb == 0, "%s: checkpoint of %llu bytes", what, (unsigned long long)cb);
    void *ckpt = malloc(cb ? cb : 1);
    if (s && ckpt) {
        brigade_session_seq_clear(s, 1);
        uint32_t one[MAX_LEN];
        for (int i = 0; i < MAX_LEN; i++)
            one[i] = 1;
        brigade_batch b = {.tokens = seqs[0], .seq = one, .n = 5};
        CHECK(brigade_session_eval_batch(s, &b, NULL, &err) == BRIGADE_OK, "%s: %s", what,
              err.message);
        CHECK(brigade_session_seq_save(s, 1, ckpt, cb, &err) == BRIGADE_OK, "%s: save: %s", what,
              err.message);
        b = (brigade_batch){.tokens = seqs[2], .seq = one, .n = 6};
        CHECK(brigade_session_eval_batch(s, &b, NULL, &err) == BRIGADE_OK, "%s: %s", what,
              err.message);
        CHECK(brigade_session_seq_restore(s, 1, ckpt, cb, 12, &err) == BRIGADE_ERR_ARG,
              "%s: restoring beyond the tokens held", what);
        CHECK(brigade_session_seq_restore(s, 1, ckpt, cb, 5, &err) == BRIGADE_OK, "%s: restore: %s",
              what, err.message);
        bool all[MAX_LEN];
        for (int i = 0; i < MAX_LEN; i++)
            all[i] = true;
        b = (brigade_batch){.tokens = seqs[0] + 5, .seq = one, .logits = all, .n = lens[0] - 5};
        CHECK(brigade_session_eval_batch(s, &b, logits, &err) == BRIGADE_OK, "%s: %s", what,
              err.message);
        double d = ref[0] ? rel_diff(logits, ref[0] + 5 * (size_t)V, (lens[0] - 5) * (size_t)V) : 1;
        CHECK(d <= 1e-6, "%s: restored checkpoint + continue differs from scratch by %g", what, d);

        /* Cutting back: anywhere for attention only, refused with recurrent state. */
        brigade_status st = brigade_session_seq_truncate(s, 1, 3, &err);
        if (recurrent) {
            CHECK(st == BRIGADE_ERR_ARG && strstr(err.message, "checkpoint"),
                  "%s: truncating a recurrent sequence: %s", what, err.message);
        } else {
            CHECK(st == BRIGADE_OK, "%s: truncate: %s", what, err.message);
            b = (brigade_batch){.tokens = seqs[0] + 3, .seq = one, .logits = all, .n = 2};
            CHECK(brigade_session_eval_batch(s, &b, logits, &err) == BRIGADE_OK, "%s: %s", what,
                  err.message);
            d = ref[0] ? rel_diff(logits, ref[0] + 3 * (size_t)V, 2 * (size_t)V) : 1;
            CHECK(d <= 1e-6, "%s: truncate + continue differs from scratch by %g", what, d);
        }
        CHECK(brigade_session_seq_truncate(s, 1, 0, &err) == BRIGADE_OK &&
                  brigade_session_seq_n_past(s, 1) == 0,
              "%s: truncate to 0", what);
    }

    /* Memory: caches and states per sequence; allocated as planned. */
    brigade_memory one, three, used;
    brigade_session_options so1 = so;
    so1.n_seq_max = 1;
    CHECK(brigade_memory_plan(m, &so1, &one, &err) == BRIGADE_OK &&
              brigade_memory_plan(m, &so, &three, &err) == BRIGADE_OK,
          "%s: plan: %s", what, err.message);
    CHECK(three.kv_bytes == 3 * one.kv_bytes && three.recurrent_bytes == 3 * one.recurrent_bytes,
          "%s: plan for 3 sequences", what);
    if (s) {
        brigade_session_memory(s, &used);
        CHECK(used.allocated_bytes == three.kv_bytes + three.recurrent_bytes + three.compute_bytes,
              "%s: allocated %llu", what, (unsigned long long)used.allocated_bytes);
    }
    free(ckpt);
    free(logits);
    for (int q = 0; q < N_SEQ; q++)
        free(ref[q]);
    brigade_session_free(s);
    brigade_model_free(m);
}

int main(void)
{
    char p35[128], p3[128];
    snprintf(p35, sizeof p35, "/tmp/brigade-seq-%d-35.gguf", (int)getpid());
    snprintf(p3, sizeof p3, "/tmp/brigade-seq-%d-3.gguf", (int)getpid());
    brigade_error err;
    brigade_synth_options o35 = {.preset = "tiny-qwen35moe", .type = 0, .seed = 3};
    brigade_synth_options o3 = {.preset = "tiny-qwen3moe", .type = 0, .seed = 3};
    CHECK(brigade_synth(p35, &o35, &err) == BRIGADE_OK, "synth: %s", err.message);
    CHECK(brigade_synth(p3, &o3, &err) == BRIGADE_OK, "synth: %s", err.message);
    check_model(p35, "qwen35moe", true);
    check_model(p3, "qwen3moe", false);
    remove(p35);
    remove(p3);
    return check_summary("test_session_seq");
}
