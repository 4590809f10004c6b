/* Sampling against llama.cpp's samplers. Each deterministic stage
 * (penalties, top-k, top-p, min-p, temperature) alone and in chains is run
 * by brigade (bg_sampler_candidates) and by llama.cpp (llama_sampler_init_*
 * + dist, applied to a llama_token_data_array) on the same logits: the
 * surviving tokens must be the same set and their probabilities agree
 * within 1e-6. Of equal logits straddling a cut, llama.cpp keeps whichever
 * its unstable sort puts first and brigade the lower ids, so tokens are
 * matched by id except at the lowest surviving logit, where they only have
 * to be as many.
 * Then: greedy is the argmax, a seed reproduces its tokens, the draw's
 * frequencies match the probabilities, bad options and logits are refused,
 * and the time of one sample() over a 248,320-token vocabulary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"
#include "llama.h"
#include "sampling.h"

enum { BIG_VOCAB = 248320 };

/* ------------------------------------------------------------- test data */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double uniform(void)
{
    return (double)(rnd() >> 11) * 0x1.0p-53;
}

static double gauss(void)
{
    double u = uniform(), v = uniform();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

typedef enum logits_kind {
    NORMAL,   /* N(0, 1): flat, top-p needs many tokens */
    WIDE,     /* N(0, 4) */
    PEAKED,   /* N(0, 1) plus a few tokens far above */
    TIES,     /* a handful of integer levels: ties everywhere */
    NEG_INF,  /* a third of the tokens at -inf */
    NEGATIVE, /* all <= 0, some exactly 0: repeat penalty multiplies */
    N_KINDS
} logits_kind;

static const char *kind_name[N_KINDS] = {"normal", "wide", "peaked", "ties", "neg-inf", "negative"};

static void make_logits(float *l, int n, logits_kind kind)
{
    for (int i = 0; i < n; i++) {
        switch (kind) {
        case NORMAL: l[i] = (float)gauss(); break;
        case WIDE: l[i] = (float)(4.0 * gauss()); break;
        case PEAKED: l[i] = (float)gauss(); break;
        case TIES: l[i] = (float)(int)(uniform() * 6) - 3.0f; break;
        case NEG_INF: l[i] = uniform() < 0.33 ? -INFINITY : (float)(2.0 * gauss()); break;
        case NEGATIVE: l[i] = uniform() < 0.1 ? 0.0f : (float)(-fabs(3.0 * gauss())); break;
        default: break;
        }
    }
    if (kind == PEAKED)
        for (int j = 0; j < 4; j++)
            l[rnd() % (uint64_t)n] = 8.0f + (float)(3.0 * uniform());
    if (kind == NEG_INF)
        l[rnd() % (uint64_t)n] = 1.0f; /* at least one finite */
}

/* Recent tokens (n_hist of them, more than most penalty_last_n, so the
 * oldest drop out): the best token often, repeats among the first few ids,
 * and random ones. */
static int make_history(int32_t *h, int n_hist, const float *l, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    for (int k = 0; k < n_hist; k++) {
        double u = uniform();
        h[k] = u < 0.3 ? best : u < 0.7 ? (int32_t)(rnd() % (uint64_t)(n < 7 ? n : 7))
                                        : (int32_t)(rnd() % (uint64_t)n);
    }
    return n_hist;
}

/* --------------------------------------------------------------- oracle */

static struct llama_sampler *oracle_chain(const brigade_sampling_options *o, int n_vocab)
{
    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_penalties(n_vocab, o->penalty_last_n,
                                                            o->repeat_penalty,
                                                            o->frequency_penalty,
                                                            o->presence_penalty));
    llama_sampler_chain_add(c, llama_sampler_init_top_k(o->top_k));
    llama_sampler_chain_add(c, llama_sampler_init_top_p(o->top_p, (size_t)o->min_keep));
    llama_sampler_chain_add(c, llama_sampler_init_min_p(o->min_p, (size_t)o->min_keep));
    llama_sampler_chain_add(c, llama_sampler_init_temp_ext(o->temp, 0.0f, 1.0f));
    llama_sampler_chain_add(c, llama_sampler_init_dist(1234));
    return c;
}

typedef struct scratch {
    llama_token_data *td;
    bg_candidate *ours, *theirs_list;
    bg_candidate *theirs; /* [n] by id */
    unsigned char *kept;  /* [n] whether brigade kept the id */
    float *logits;
    int32_t *history;
} scratch;

static int n_cases, n_tie_cuts;

/* One case: brigade and llama.cpp with options o on logits l. */
static void compare(const char *what, const brigade_sampling_options *o, const float *l, int n,
                    const int32_t *hist, int n_hist, scratch *w)
{
    brigade_sampler *s;
    brigade_error err;
    if (brigade_sampler_new(o, n, &s, &err)) {
        CHECK(0, "%s: %s", what, err.message);
        return;
    }
    struct llama_sampler *chain = oracle_chain(o, n);
    int refused = 0;
    for (int i = 0; i < n_hist; i++) {
        refused += brigade_sampler_accept(s, hist[i], &err) != BRIGADE_OK;
        llama_sampler_accept(chain, hist[i]);
    }
    if (refused)
        CHECK(0, "%s: %d tokens not accepted: %s", what, refused, err.message);
    const bg_candidate *c;
    size_t nc = 0;
    brigade_status st = bg_sampler_candidates(s, l, &c, &nc, &err);
    CHECK(st == BRIGADE_OK, "%s: %s", what, err.message);
    if (st) {
        brigade_sampler_free(s);
        llama_sampler_free(chain);
        return;
    }
    memcpy(w->ours, c, nc * sizeof *c);

    for (int i = 0; i < n; i++)
        w->td[i] = (llama_token_data){i, l[i], 0.0f};
    llama_token_data_array arr = {w->td, (size_t)n, -1, false};
    llama_sampler_apply(chain, &arr);
    /* Greedy: llama.cpp keeps every candidate, all but one with p = 0. */
    size_t nt = 0;
    for (size_t i = 0; i < arr.size; i++)
        if (o->temp > 0.0f || arr.data[i].p > 0.0f)
            w->theirs_list[nt++] =
                (bg_candidate){arr.data[i].id, arr.data[i].logit, arr.data[i].p};

    /* Matched by id: theirs[id] holds llama.cpp's candidate, id -1 if it
     * dropped the token. */
    for (int i = 0; i < n; i++)
        w->theirs[i].id = -1;
    for (size_t i = 0; i < nt; i++)
        w->theirs[w->theirs_list[i].id] = w->theirs_list[i];
    memset(w->kept, 0, (size_t)n);
    float lowest = INFINITY;
    for (size_t i = 0; i < nc; i++) {
        w->kept[w->ours[i].id] = 1;
        if (w->ours[i].logit < lowest)
            lowest = w->ours[i].logit;
    }
    bool ok = nc == nt;
    double max_dp = 0.0;
    int bad = -1, unmatched = 0;
    for (size_t i = 0; ok && i < nc; i++) {
        const bg_candidate *a = &w->ours[i], *b = &w->theirs[a->id];
        if (b->id < 0) { /* kept by brigade only: must be a tie at the cut */
            unmatched++;
            ok = a->logit == lowest;
            bad = ok ? bad : a->id;
            continue;
        }
        /* Same logit bits, -inf included. */
        if (memcmp(&a->logit, &b->logit, sizeof a->logit) != 0) {
            ok = false;
            bad = a->id;
        }
        double dp = fabs((double)a->p - (double)b->p);
        if (dp > max_dp)
            max_dp = dp;
    }
    /* What llama.cpp kept instead sits at the same logit. */
    for (size_t i = 0; ok && unmatched && i < nt; i++) {
        const bg_candidate *b = &w->theirs_list[i];
        if (b->logit == lowest)
            continue;
        ok = w->kept[b->id];
        bad = ok ? bad : b->id;
    }
    bool tie_cut = unmatched > 0;
    n_cases++;
    n_tie_cuts += tie_cut;
    CHECK(ok && max_dp <= 1e-6,
          "%s: brigade kept %zu, llama.cpp %zu; max |dp| %.3g; first difference at token %d "
          "(input logit %.9g)",
          what, nc, nt, max_dp, bad, bad >= 0 ? (double)l[bad] : 0.0);
    brigade_sampler_free(s);
    llama_sampler_free(chain);
}

/* Options with only the named stages on. */
static brigade_sampling_options plain(void)
{
    brigade_sampling_options o = brigade_sampling_defaults();
    o.temp = 1.0f;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    return o;
}

static void parity(scratch *w)
{
    static const int sizes[] = {10, 1000, BIG_VOCAB};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int n = sizes[si];
        for (int kind = 0; kind < N_KINDS; kind++) {
            make_logits(w->logits, n, (logits_kind)kind);
            const float *l = w->logits;
            int32_t *h = w->history;
            int nh = make_history(h, 100, l, n);
            char what[160];
            brigade_sampling_options o;
#define CASE(...)                                                                  \
    do {                                                                           \
        snprintf(what, sizeof what, "n=%d %s: " __VA_ARGS__);                      \
        compare(what, &o, l, n, h, nh, w);                                         \
    } while (0)

            /* penalties alone: history longer than last_n, repeats */
            o = plain();
            o.repeat_penalty = 1.3f, o.frequency_penalty = 0.2f, o.presence_penalty = 0.5f;
            o.penalty_last_n = 32;
            CASE("penalties 1.3/0.2/0.5 last 32", n, kind_name[kind]);
            o.repeat_penalty = 0.8f, o.frequency_penalty = -0.3f, o.presence_penalty = 0.0f;
            o.penalty_last_n = 200;
            CASE("penalties 0.8/-0.3/0 last 200", n, kind_name[kind]);
            o.repeat_penalty = 1.1f, o.frequency_penalty = 0.0f, o.penalty_last_n = 1;
            CASE("penalties 1.1 last 1", n, kind_name[kind]);

            /* top-k alone, k from 1 to past the vocabulary */
            const int ks[] = {1, 5, 40, 129, 300, n - 1, n, n + 7, 2 * n};
            for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
                if (ks[i] < 1)
                    continue;
                o = plain();
                o.top_k = ks[i];
                CASE("top_k %d", n, kind_name[kind], ks[i]);
            }

            /* top-p alone */
            const float ps[] = {0.1f, 0.5f, 0.9f, 0.95f, 0.999f};
            for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
                o = plain();
                o.top_p = ps[i];
                CASE("top_p %g", n, kind_name[kind], (double)ps[i]);
            }
            o = plain();
            o.top_p = 0.2f, o.min_keep = 3;
            CASE("top_p 0.2 min_keep 3", n, kind_name[kind]);

            /* min-p alone */
            const float mps[] = {0.01f, 0.05f, 0.3f, 1.0f};
            for (size_t i = 0; i < sizeof mps / sizeof *mps; i++) {
                o = plain();
                o.min_p = mps[i];
                CASE("min_p %g", n, kind_name[kind], (double)mps[i]);
            }
            o = plain();
            o.min_p = 0.5f, o.min_keep = 5;
            CASE("min_p 0.5 min_keep 5", n, kind_name[kind]);
            o.min_keep = 60;
            CASE("min_p 0.5 min_keep 60", n, kind_name[kind]);

            /* temperature alone */
            const float ts[] = {0.3f, 0.8f, 1.7f};
            for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
                o = plain();
                o.temp = ts[i];
                CASE("temp %g", n, kind_name[kind], (double)ts[i]);
            }

            /* chains */
            o = brigade_sampling_defaults();
            CASE("defaults", n, kind_name[kind]);
            o.repeat_penalty = 1.15f, o.presence_penalty = 0.3f, o.frequency_penalty = 0.1f;
            CASE("defaults + penalties", n, kind_name[kind]);
            o = brigade_sampling_defaults();
            o.top_k = 0, o.top_p = 0.9f, o.min_p = 0.05f, o.temp = 0.7f;
            CASE("top_p 0.9 min_p 0.05 temp 0.7", n, kind_name[kind]);
            o = brigade_sampling_defaults();
            o.top_k = 100, o.top_p = 0.5f, o.min_p = 0.1f, o.temp = 1.5f;
            o.repeat_penalty = 1.2f, o.penalty_last_n = 16;
            CASE("top_k 100 top_p 0.5 min_p 0.1 temp 1.5 + repeat", n, kind_name[kind]);
            o = brigade_sampling_defaults();
            o.top_k = n + 5, o.top_p = 0.95f, o.min_p = 0.02f;
            CASE("top_k > n top_p 0.95 min_p 0.02", n, kind_name[kind]);
            o = plain();
            o.min_p = 0.1f, o.temp = 0.5f, o.min_keep = 10;
            CASE("min_p 0.1 min_keep 10 temp 0.5", n, kind_name[kind]);
            o = brigade_sampling_defaults();
            o.top_p = 0.99f, o.min_keep = 50;
            CASE("defaults top_p 0.99 min_keep 50", n, kind_name[kind]);

            /* greedy */
            o = brigade_sampling_defaults();
            o.temp = 0.0f;
            CASE("greedy", n, kind_name[kind]);
            o.temp = -1.0f, o.repeat_penalty = 1.5f, o.presence_penalty = 1.0f;
            CASE("greedy temp -1 + penalties", n, kind_name[kind]);
#undef CASE
        }
    }
}

/* ------------------------------------------------------------- the draw */

static void greedy_is_argmax(scratch *w)
{
    brigade_sampling_options o = brigade_sampling_defaults();
    o.temp = 0.0f;
    brigade_sampler *s;
    brigade_error err;
    CHECK(brigade_sampler_new(&o, BIG_VOCAB, &s, &err) == BRIGADE_OK, "%s", err.message);
    int good = 0;
    for (int t = 0; t < 20; t++) {
        make_logits(w->logits, BIG_VOCAB, (logits_kind)(t % N_KINDS));
        int best = 0;
        for (int i = 1; i < BIG_VOCAB; i++)
            if (w->logits[i] > w->logits[best])
                best = i;
        int32_t tok = -1;
        CHECK(brigade_sampler_sample(s, w->logits, &tok, &err) == BRIGADE_OK, "%s", err.message);
        good += tok == best;
    }
    CHECK(good == 20, "greedy: %d of 20 draws were the argmax (first of equals)", good);
    brigade_sampler_free(s);
}

static void generate(brigade_sampler *s, int32_t *out, int n, scratch *w)
{
    brigade_error err;
    uint64_t saved = rng_state;
    rng_state = 99; /* the same logits each time */
    int failed = 0;
    for (int i = 0; i < n; i++) {
        make_logits(w->logits, 1000, NORMAL);
        out[i] = -1;
        failed += brigade_sampler_sample(s, w->logits, &out[i], &err) != BRIGADE_OK ||
                  brigade_sampler_accept(s, out[i], &err) != BRIGADE_OK;
    }
    CHECK(failed == 0, "%d of %d steps failed: %s", failed, n, err.message);
    rng_state = saved;
}

static void reproducible(scratch *w)
{
    enum { N = 200 };
    brigade_sampling_options o = brigade_sampling_defaults();
    o.repeat_penalty = 1.1f;
    o.seed = 42;
    brigade_sampler *a, *b, *c;
    brigade_error err;
    brigade_sampler_new(&o, 1000, &a, &err);
    brigade_sampler_new(&o, 1000, &b, &err);
    o.seed = 43;
    brigade_sampler_new(&o, 1000, &c, &err);
    int32_t ta[N], tb[N], tc[N], tr[N];
    generate(a, ta, N, w);
    generate(b, tb, N, w);
    generate(c, tc, N, w);
    brigade_sampler_reset(a);
    generate(a, tr, N, w);
    int distinct = 0;
    for (int i = 0; i < N; i++)
        distinct += ta[i] != ta[0];
    CHECK(distinct > 0, "seeded draws: all %d tokens are %d", N, ta[0]);
    CHECK(memcmp(ta, tb, sizeof ta) == 0, "the same seed gave different tokens");
    CHECK(memcmp(ta, tr, sizeof ta) == 0, "reset did not restart the same tokens");
    int differ = 0;
    for (int i = 0; i < N; i++)
        differ += ta[i] != tc[i];
    CHECK(differ > N / 4, "seeds 42 and 43 differ at only %d of %d tokens", differ, N);
    brigade_sampler_free(a);
    brigade_sampler_free(b);
    brigade_sampler_free(c);
}

/* Frequencies of many draws from a fixed distribution against its
 * probabilities: within 5 standard errors. */
static void frequencies(void)
{
    static const double probs[] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
    enum { K = 6, DRAWS = 400000 };
    float l[K];
    for (int i = 0; i < K; i++)
        l[i] = (float)log(probs[i]);
    for (int top_k = 0; top_k <= 3; top_k += 3) {
        brigade_sampling_options o = plain();
        o.top_k = top_k;
        o.seed = 7;
        brigade_sampler *s;
        brigade_error err;
        brigade_sampler_new(&o, K, &s, &err);
        const bg_candidate *c;
        size_t nc;
        double expect[K] = {0};
        bg_sampler_candidates(s, l, &c, &nc, &err);
        for (size_t i = 0; i < nc; i++)
            expect[c[i].id] = c[i].p;
        double kept = top_k ? probs[0] + probs[1] + probs[2] : 1.0;
        for (int i = 0; i < K; i++) {
            double want = top_k && i >= top_k ? 0.0 : probs[i] / kept;
            CHECK(fabs(expect[i] - want) < 1e-6, "top_k %d: p[%d] = %g, expected %g", top_k, i,
                  expect[i], want);
        }
        long hits[K] = {0};
        for (int d = 0; d < DRAWS; d++) {
            int32_t t = -1;
            brigade_sampler_sample(s, l, &t, &err);
            if (t >= 0 && t < K)
                hits[t]++;
        }
        for (int i = 0; i < K; i++) {
            double f = (double)hits[i] / DRAWS, p = expect[i];
            double se = sqrt(p * (1 - p) / DRAWS);
            CHECK(p == 0.0 ? hits[i] == 0 : fabs(f - p) <= 5 * se,
                  "top_k %d: token %d drawn %.5f of the time, p = %.5f (se %.5f)", top_k, i, f,
                  p, se);
        }
        brigade_sampler_free(s);
    }
}

/* ------------------------------------------------------------ refusals */

static void refused(const brigade_sampling_options *o, int32_t n_vocab, const char *needle)
{
    static int sentinel;
    brigade_sampler *s = (brigade_sampler *)&sentinel; /* must come back NULL */
    brigade_error err = {0};
    brigade_status st = brigade_sampler_new(o, n_vocab, &s, &err);
    CHECK(st == BRIGADE_ERR_ARG && s == NULL && strstr(err.message, needle),
          "options with bad %s: status %d, message \"%s\"", needle, st, err.message);
}

static void bad_options(void)
{
    brigade_sampling_options o;
#define BAD(field, value, needle)                                                 \
    do {                                                                          \
        o = brigade_sampling_defaults();                                          \
        o.field = value;                                                          \
        refused(&o, 1000, needle);                                                \
    } while (0)
    BAD(temp, NAN, "temp = nan");
    BAD(temp, INFINITY, "temp = inf");
    BAD(top_k, -1, "top_k = -1");
    BAD(top_p, 0.0f, "top_p = 0 is outside (0, 1]");
    BAD(top_p, 1.5f, "top_p = 1.5");
    BAD(top_p, -0.5f, "top_p = -0.5");
    BAD(top_p, NAN, "top_p = nan");
    BAD(min_p, -0.1f, "min_p = -0.1 is outside [0, 1]");
    BAD(min_p, 1.01f, "min_p = 1.01");
    BAD(min_p, NAN, "min_p = nan");
    BAD(min_keep, -2, "min_keep = -2");
    BAD(repeat_penalty, 0.0f, "repeat_penalty = 0");
    BAD(repeat_penalty, -1.0f, "repeat_penalty = -1");
    BAD(repeat_penalty, NAN, "repeat_penalty = nan");
    BAD(presence_penalty, INFINITY, "presence_penalty = inf");
    BAD(frequency_penalty, NAN, "frequency_penalty = nan");
    BAD(penalty_last_n, -1, "penalty_last_n = -1");
#undef BAD
    o = brigade_sampling_defaults();
    refused(&o, 0, "n_vocab = 0");
    refused(&o, -5, "n_vocab = -5");
    refused(NULL, 0, "n_vocab = 0");

    /* Edges that are allowed. */
    brigade_sampler *s;
    brigade_error err;
    o.top_p = 1.0f, o.min_p = 1.0f, o.temp = -3.0f, o.penalty_last_n = 0, o.top_k = 0;
    CHECK(brigade_sampler_new(&o, 10, &s, &err) == BRIGADE_OK, "edge options refused: %s",
          err.message);
    brigade_sampler_free(s);
    CHECK(brigade_sampler_new(NULL, 10, &s, &err) == BRIGADE_OK, "NULL options: %s", err.message);

    /* Bad tokens and logits. */
    CHECK(brigade_sampler_accept(s, 10, &err) == BRIGADE_ERR_ARG &&
              strstr(err.message, "token 10 is outside the vocabulary (0..9)"),
          "accept(10): %s", err.message);
    CHECK(brigade_sampler_accept(s, -1, &err) == BRIGADE_ERR_ARG, "accept(-1) taken");
    float l[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    int32_t t;
    l[4] = NAN;
    CHECK(brigade_sampler_sample(s, l, &t, &err) == BRIGADE_ERR_ARG &&
              strstr(err.message, "logit of token 4 is NaN"),
          "NaN logit: %s", err.message);
    l[4] = INFINITY;
    CHECK(brigade_sampler_sample(s, l, &t, &err) == BRIGADE_ERR_ARG &&
              strstr(err.message, "logit of token 4 is +inf"),
          "+inf logit: %s", err.message);
    for (int i = 0; i < 10; i++)
        l[i] = -INFINITY;
    CHECK(brigade_sampler_sample(s, l, &t, &err) == BRIGADE_ERR_ARG &&
              strstr(err.message, "every logit is -inf"),
          "all -inf: %s", err.message);
    l[3] = -1e30f;
    CHECK(brigade_sampler_sample(s, l, &t, &err) == BRIGADE_OK && t == 3,
          "one finite logit: token %d (%s)", t, err.message);
    CHECK(brigade_sampler_sample(s, l, NULL, &err) == BRIGADE_ERR_ARG, "NULL token_out taken");
    CHECK(brigade_sampler_sample(s, NULL, &t, &err) == BRIGADE_ERR_ARG, "NULL logits taken");
    brigade_sampler_free(s);
    brigade_sampler_free(NULL);
}

/* ---------------------------------------------------------------- timing */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void timing(scratch *w)
{
    /* Logits shaped like a model's: a broad body and a few likely tokens. */
    make_logits(w->logits, BIG_VOCAB, PEAKED);
    for (int i = 0; i < BIG_VOCAB; i++)
        w->logits[i] *= 2.0f;
    static const struct {
        const char *name;
        int top_k;
        float temp, repeat;
    } cfg[] = {{"defaults", 40, 0.8f, 1.0f},
               {"defaults + repeat 1.1", 40, 0.8f, 1.1f},
               {"top_k 0", 0, 0.8f, 1.0f},
               {"greedy", 40, 0.0f, 1.0f}};
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        brigade_sampling_options o = brigade_sampling_defaults();
        o.top_k = cfg[c].top_k, o.temp = cfg[c].temp, o.repeat_penalty = cfg[c].repeat;
        brigade_sampler *s;
        brigade_error err;
        brigade_sampler_new(&o, BIG_VOCAB, &s, &err);
        for (int i = 0; i < 64; i++)
            brigade_sampler_accept(s, (int32_t)(rnd() % BIG_VOCAB), &err);
        enum { REPS = 200 };
        int32_t t;
        brigade_sampler_sample(s, w->logits, &t, &err); /* warm */
        double t0 = now();
        for (int r = 0; r < REPS; r++)
            brigade_sampler_sample(s, w->logits, &t, &err);
        double ours = (now() - t0) / REPS;
        /* llama.cpp's chain on the same logits, array filling included (as
         * llama_sampler_sample does it). */
        struct llama_sampler *chain = oracle_chain(&o, BIG_VOCAB);
        t0 = now();
        for (int r = 0; r < REPS / 4; r++) {
            for (int i = 0; i < BIG_VOCAB; i++)
                w->td[i] = (llama_token_data){i, w->logits[i], 0.0f};
            llama_token_data_array arr = {w->td, BIG_VOCAB, -1, false};
            llama_sampler_apply(chain, &arr);
        }
        double theirs = (now() - t0) / (REPS / 4);
        printf("sample() over %d tokens, %s: %.1f us (llama.cpp's chain: %.1f us)\n", BIG_VOCAB,
               cfg[c].name, ours * 1e6, theirs * 1e6);
        llama_sampler_free(chain);
        brigade_sampler_free(s);
    }
}

int main(void)
{
    oracle_init();
    enum { N = 2 * BIG_VOCAB + 16 };
    scratch w = {
        .td = malloc(N * sizeof(llama_token_data)),
        .ours = malloc(N * sizeof(bg_candidate)),
        .theirs = malloc(N * sizeof(bg_candidate)),
        .theirs_list = malloc(N * sizeof(bg_candidate)),
        .kept = malloc(N),
        .logits = malloc(N * sizeof(float)),
        .history = malloc(1000 * sizeof(int32_t)),
    };
    if (!w.td || !w.ours || !w.theirs || !w.theirs_list || !w.kept || !w.logits || !w.history) {
        CHECK(0, "out of memory");
        return check_summary("oracle_sampling");
    }
    rng_state = 1;
    double t0 = now();
    parity(&w);
    printf("%d cases against llama.cpp (%d with equal logits at the cut), %.1f s\n", n_cases,
           n_tie_cuts, now() - t0);
    greedy_is_argmax(&w);
    reproducible(&w);
    frequencies();
    bad_options();
    timing(&w);
    free(w.td);
    free(w.ours);
    free(w.theirs);
    free(w.theirs_list);
    free(w.kept);
    free(w.logits);
    free(w.history);
    llama_backend_free();
    return check_summary("oracle_sampling");
}
