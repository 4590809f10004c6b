/* Sampling: llama.cpp's default chain (penalties -> top-k -> top-p -> min-p
 * -> temperature -> dist) over a candidate list, with the same formulas and
 * the same float arithmetic where it decides which tokens survive, but
 * without sorting the vocabulary when a partial selection gives the same
 * result.
 *
 * The candidate list is either in id order ("unsorted": the vocabulary, or
 * what min-p left of it) or the best candidates, best first ("sorted"), the
 * two states llama.cpp's llama_token_data_array is in after the same stages.
 * Which state a stage leaves matters: softmax sums in list order, so top-p's
 * cut comes from the same float sums as llama.cpp's only if the list is in
 * the same order. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "sampling.h"

struct brigade_sampler {
    brigade_sampling_options opts;
    int32_t n_vocab;
    bool penalize; /* some penalty is on: history is kept */

    /* The last penalty_last_n accepted tokens, a ring, and how often each
     * token occurs there; distinct lists the tokens with a count. */
    int32_t *ring;
    int32_t ring_len, ring_head;
    int32_t *count;    /* [n_vocab] */
    int32_t *distinct; /* [min(penalty_last_n, n_vocab)] */
    int32_t n_distinct;

    bg_candidate *cand; /* [n_vocab] the list the stages work on */
    size_t n_cand;
    bool sorted;
    bg_candidate *work; /* [n_vocab] selections */

    uint64_t rng[4]; /* xoshiro256** */
};

brigade_sampling_options brigade_sampling_defaults(void)
{
    return (brigade_sampling_options){
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .min_keep = 0,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_last_n = 64,
        .seed = 0,
    };
}

/* ------------------------------------------------------------------ random */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void rng_seed(brigade_sampler *s)
{
    uint64_t x = s->opts.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t *r)
{
    uint64_t out = rotl(r[1] * 5, 7) * 9;
    uint64_t t = r[1] << 17;
    r[2] ^= r[0];
    r[3] ^= r[1];
    r[1] ^= r[2];
    r[0] ^= r[3];
    r[2] ^= t;
    r[3] = rotl(r[3], 45);
    return out;
}

/* Uniform in [0, 1), 53 bits. */
static double rng_uniform(uint64_t *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* -------------------------------------------------------------- lifecycle */

static brigade_status check_options(const brigade_sampling_options *o, int32_t n_vocab,
                                    brigade_error *err)
{
    const brigade_status E = BRIGADE_ERR_ARG;
    if (n_vocab <= 0)
        return bg_fail(err, E, "sampling: n_vocab = %d, must be positive", n_vocab);
    if (!isfinite(o->temp))
        return bg_fail(err, E, "sampling: temp = %g is not a finite number (<= 0 means greedy)",
                       (double)o->temp);
    if (o->top_k < 0)
        return bg_fail(err, E, "sampling: top_k = %d is negative (0 turns top-k off)", o->top_k);
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        return bg_fail(err, E, "sampling: top_p = %g is outside (0, 1] (1 turns top-p off)",
                       (double)o->top_p);
    if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
        return bg_fail(err, E, "sampling: min_p = %g is outside [0, 1] (0 turns min-p off)",
                       (double)o->min_p);
    if (o->min_keep < 0)
        return bg_fail(err, E, "sampling: min_keep = %d is negative", o->min_keep);
    if (!(isfinite(o->repeat_penalty) && o->repeat_penalty > 0.0f))
        return bg_fail(err, E,
                       "sampling: repeat_penalty = %g, must be a finite number > 0 (1 turns it off)",
                       (double)o->repeat_penalty);
    if (!isfinite(o->presence_penalty))
        return bg_fail(err, E, "sampling: presence_penalty = %g is not a finite number",
                       (double)o->presence_penalty);
    if (!isfinite(o->frequency_penalty))
        return bg_fail(err, E, "sampling: frequency_penalty = %g is not a finite number",
                       (double)o->frequency_penalty);
    if (o->penalty_last_n < 0)
        return bg_fail(err, E, "sampling: penalty_last_n = %d is negative (0 turns penalties off)",
                       o->penalty_last_n);
    return BRIGADE_OK;
}

brigade_status brigade_sampler_new(const brigade_sampling_options *opts, int32_t n_vocab,
                                   brigade_sampler **out, brigade_error *err)
{
    if (!out)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: no place for the sampler (out is NULL)");
    *out = NULL;
    brigade_sampling_options o = opts ? *opts : brigade_sampling_defaults();
    brigade_status st = check_options(&o, n_vocab, err);
    if (st)
        return st;
    brigade_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "sampling: out of memory");
    s->opts = o;
    s->n_vocab = n_vocab;
    /* As llama.cpp: penalties are off when no token is remembered or every
     * penalty is neutral. */
    s->penalize = o.penalty_last_n > 0 &&
                  (o.repeat_penalty != 1.0f || o.frequency_penalty != 0.0f ||
                   o.presence_penalty != 0.0f);
    bool ok = true;
    if (s->penalize) {
        s->ring = malloc((size_t)o.penalty_last_n * sizeof *s->ring);
        int32_t most = o.penalty_last_n < n_vocab ? o.penalty_last_n : n_vocab;
        s->distinct = malloc((size_t)most * sizeof *s->distinct);
        s->count = calloc((size_t)n_vocab, sizeof *s->count);
        ok = s->ring && s->distinct && s->count;
    }
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    if (!ok || !s->cand || !s->work) {
        brigade_sampler_free(s);
        return bg_fail(err, BRIGADE_ERR_NOMEM,
                       "sampling: out of memory for buffers of %d tokens (penalty_last_n %d)",
                       n_vocab, o.penalty_last_n);
    }
    rng_seed(s);
    *out = s;
    return BRIGADE_OK;
}

void brigade_sampler_free(brigade_sampler *s)
{
    if (!s)
        return;
    free(s->ring);
    free(s->distinct);
    free(s->count);
    free(s->cand);
    free(s->work);
    free(s);
}

void brigade_sampler_reset(brigade_sampler *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->n_distinct; i++)
        s->count[s->distinct[i]] = 0;
    s->n_distinct = 0;
    s->ring_len = s->ring_head = 0;
    rng_seed(s);
}

/* ---------------------------------------------------------------- history */

static void forget(brigade_sampler *s, int32_t token)
{
    if (--s->count[token] > 0)
        return;
    for (int32_t i = 0; i < s->n_distinct; i++) {
        if (s->distinct[i] == token) {
            s->distinct[i] = s->distinct[--s->n_distinct];
            return;
        }
    }
}

brigade_status brigade_sampler_accept(brigade_sampler *s, int32_t token, brigade_error *err)
{
    if (!s)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: no sampler");
    if (token < 0 || token >= s->n_vocab)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: token %d is outside the vocabulary (0..%d)",
                       token, s->n_vocab - 1);
    if (!s->penalize)
        return BRIGADE_OK;
    const int32_t cap = s->opts.penalty_last_n;
    if (s->ring_len < cap) { /* the head moves only once the ring is full */
        s->ring[s->ring_len++] = token;
    } else { /* full: the oldest token leaves first */
        forget(s, s->ring[s->ring_head]);
        s->ring[s->ring_head] = token;
        s->ring_head = (s->ring_head + 1) % cap;
    }
    if (s->count[token]++ == 0)
        s->distinct[s->n_distinct++] = token;
    return BRIGADE_OK;
}

/* ------------------------------------------------------------- candidates */

/* a comes before b: the higher logit, the lower id between equal logits. */
static inline bool ahead(const bg_candidate *a, const bg_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* The best cap candidates offered so far, as a heap whose root is the one
 * to drop first. */
typedef struct heap {
    bg_candidate *v;
    size_t n, cap;
} heap;

static void sift_down(bg_candidate *v, size_t n, size_t i)
{
    bg_candidate x = v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ahead(&v[c], &v[c + 1]))
            c++; /* the child to drop first */
        if (!ahead(&x, &v[c]))
            break;
        v[i] = v[c];
        i = c;
    }
    v[i] = x;
}

static void heap_offer(heap *h, bg_candidate c)
{
    if (h->n < h->cap) {
        size_t i = h->n++;
        while (i > 0) {
            size_t parent = (i - 1) / 2;
            if (!ahead(&h->v[parent], &c))
                break;
            h->v[i] = h->v[parent];
            i = parent;
        }
        h->v[i] = c;
    } else if (ahead(&c, &h->v[0])) {
        h->v[0] = c;
        sift_down(h->v, h->n, 0);
    }
}

/* Leaves the heap's candidates best first. */
static void heap_sort(heap *h)
{
    for (size_t end = h->n; end > 1; end--) {
        bg_candidate last = h->v[0];
        h->v[0] = h->v[end - 1];
        h->v[end - 1] = last;
        sift_down(h->v, end - 1, 0);
    }
}

/* llama.cpp's penalties, in its float arithmetic. Dividing a negative logit
 * would make the token more likely, so those are multiplied. */
static float penalized(const brigade_sampling_options *o, float logit, int32_t count)
{
    if (logit <= 0.0f)
        logit *= o->repeat_penalty;
    else
        logit /= o->repeat_penalty;
    logit -= (float)count * o->frequency_penalty + (float)(count > 0) * o->presence_penalty;
    return logit;
}

/* Loops over logits run in blocks of a fixed size, a shape the compiler
 * vectorizes, with a scalar loop for the rest. */
enum { BLOCK = 32 };

static brigade_status check_logits(const float *logits, int32_t n, brigade_error *err)
{
    int bad = 0, finite = 0;
    int32_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        for (int j = 0; j < BLOCK; j++) {
            bad |= !(logits[i + j] <= FLT_MAX); /* NaN or +inf */
            finite |= logits[i + j] > -INFINITY;
        }
    }
    for (; i < n; i++) {
        bad |= !(logits[i] <= FLT_MAX);
        finite |= logits[i] > -INFINITY;
    }
    if (bad) {
        for (i = 0; i < n; i++)
            if (!(logits[i] <= FLT_MAX))
                return bg_fail(err, BRIGADE_ERR_ARG, "sampling: the logit of token %d is %s", i,
                               isnan(logits[i]) ? "NaN" : "+inf");
    }
    if (!finite)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: every logit is -inf");
    return BRIGADE_OK;
}

/* The best m tokens of the penalized logits, best first, without copying
 * the vocabulary: recent tokens are left out of the scan and offered with
 * their penalized logits after it. The scan checks the logits on its way
 * (check_logits, which reports, runs only when something is wrong). */
static brigade_status take_best_logits(brigade_sampler *s, const float *logits, size_t m,
                                       brigade_error *err)
{
    heap h = {s->cand, 0, m};
    const int32_t *count = s->penalize ? s->count : NULL;
    const size_t n = (size_t)s->n_vocab;
    int bad = 0, finite = 0;
    size_t i = 0;
    for (; i < n && h.n < m; i++) {
        bad |= !(logits[i] <= FLT_MAX);
        finite |= logits[i] > -INFINITY;
        if (!count || !count[i])
            heap_offer(&h, (bg_candidate){(int32_t)i, logits[i], 0.0f});
    }
    /* Full: a later token must beat the root's logit (an equal one loses
     * on its higher id). Most blocks have nothing that does. */
    float floor = h.n ? h.v[0].logit : -INFINITY;
    for (; i < n; i += BLOCK) {
        const size_t end = i + BLOCK <= n ? i + BLOCK : n;
        if (end - i == BLOCK) {
            int any = 0;
            for (int j = 0; j < BLOCK; j++) {
                const float v = logits[i + j];
                any |= v > floor;
                bad |= !(v <= FLT_MAX);
                finite |= v > -INFINITY;
            }
            if (!any)
                continue;
        } else {
            for (size_t j = i; j < end; j++) {
                bad |= !(logits[j] <= FLT_MAX);
                finite |= logits[j] > -INFINITY;
            }
        }
        for (size_t j = i; j < end; j++) {
            if (logits[j] > floor && (!count || !count[j])) {
                heap_offer(&h, (bg_candidate){(int32_t)j, logits[j], 0.0f});
                floor = h.v[0].logit;
            }
        }
    }
    if (bad || !finite)
        return check_logits(logits, s->n_vocab, err);
    for (int32_t j = 0; count && j < s->n_distinct; j++) {
        int32_t t = s->distinct[j];
        heap_offer(&h, (bg_candidate){t, penalized(&s->opts, logits[t], count[t]), 0.0f});
    }
    heap_sort(&h);
    s->n_cand = h.n;
    s->sorted = true;
    return BRIGADE_OK;
}

/* The whole vocabulary in id order, penalized. */
static void take_all_logits(brigade_sampler *s, const float *logits)
{
    const size_t n = (size_t)s->n_vocab;
    for (size_t i = 0; i < n; i++)
        s->cand[i] = (bg_candidate){(int32_t)i, logits[i], 0.0f};
    for (int32_t j = 0; s->penalize && j < s->n_distinct; j++) {
        int32_t t = s->distinct[j];
        s->cand[t].logit = penalized(&s->opts, logits[t], s->count[t]);
    }
    s->n_cand = n;
    s->sorted = false;
}

/* Beyond this many, the best are found by partial quicksort instead of a
 * heap, which is slow when large. */
enum { HEAP_MAX = 512 };

static void swap_cand(bg_candidate *a, bg_candidate *b)
{
    bg_candidate t = *a;
    *a = *b;
    *b = t;
}

/* Hoare partition of v[0..n), n >= 2, around its middle element (ids are
 * distinct, so no two candidates are equal): returns p with v[0..p) all
 * ahead of v[p..n), both parts non-empty. */
static size_t partition(bg_candidate *v, size_t n)
{
    size_t mid = (n - 1) / 2;
    /* median of three, moved to the middle */
    if (ahead(&v[mid], &v[0]))
        swap_cand(&v[mid], &v[0]);
    if (ahead(&v[n - 1], &v[mid])) {
        swap_cand(&v[n - 1], &v[mid]);
        if (ahead(&v[mid], &v[0]))
            swap_cand(&v[mid], &v[0]);
    }
    const bg_candidate pivot = v[mid];
    size_t i = 0, j = n - 1;
    for (;;) {
        while (ahead(&v[i], &pivot))
            i++;
        while (ahead(&pivot, &v[j]))
            j--;
        if (i >= j)
            return j + 1;
        swap_cand(&v[i], &v[j]);
        i++;
        j--;
    }
}

/* Orders v[0..n) far enough that v[0..m) are its best m, best first:
 * quicksort that only descends into parts reaching below m, a heapsort of
 * the part when it nests too deep. */
static void sort_best(bg_candidate *v, size_t n, size_t m, int depth)
{
    while (n > 16 && m > 0) {
        if (depth-- == 0) {
            for (size_t i = n / 2; i-- > 0;)
                sift_down(v, n, i);
            heap_sort(&(heap){v, n, n});
            return;
        }
        size_t p = partition(v, n);
        if (m > p) {
            sort_best(v, p, p, depth);
            v += p;
            n -= p;
            m -= p;
        } else {
            n = p;
        }
    }
    for (size_t i = 1; m > 0 && i < n; i++) { /* insertion sort of the few left */
        bg_candidate x = v[i];
        size_t j = i;
        for (; j > 0 && ahead(&x, &v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* The best m candidates of the list into work, best first (the list is
 * unchanged). */
static size_t select_best(brigade_sampler *s, size_t m)
{
    const size_t n = s->n_cand;
    if (m > n)
        m = n;
    if (m > HEAP_MAX) {
        memcpy(s->work, s->cand, n * sizeof *s->work);
        int depth = 0;
        for (size_t k = n; k > 1; k >>= 1)
            depth += 2;
        sort_best(s->work, n, m, depth);
        return m;
    }
    heap h = {s->work, 0, m};
    size_t i = 0;
    for (; i < n && h.n < h.cap; i++)
        heap_offer(&h, s->cand[i]);
    for (float floor = h.n ? h.v[0].logit : -INFINITY; i < n; i++) {
        if (s->cand[i].logit >= floor) { /* an equal logit may have a lower id */
            heap_offer(&h, s->cand[i]);
            floor = h.v[0].logit;
        }
    }
    heap_sort(&h);
    return h.n;
}

/* Cuts the list to its best m candidates, best first. */
static void keep_best(brigade_sampler *s, size_t m)
{
    if (s->sorted) {
        s->n_cand = m < s->n_cand ? m : s->n_cand;
        return;
    }
    size_t n = select_best(s, m);
    memcpy(s->cand, s->work, n * sizeof *s->cand);
    s->n_cand = n;
    s->sorted = true;
}

/* llama_sampler_softmax_impl without sorting: float sums in list order. */
static void softmax_float(brigade_sampler *s)
{
    bg_candidate *c = s->cand;
    float max = c[0].logit;
    for (size_t i = 1; !s->sorted && i < s->n_cand; i++)
        if (c[i].logit > max)
            max = c[i].logit;
    float sum = 0.0f;
    for (size_t i = 0; i < s->n_cand; i++) {
        c[i].p = expf(c[i].logit - max);
        sum += c[i].p;
    }
    for (size_t i = 0; i < s->n_cand; i++)
        c[i].p /= sum;
}

/* The first i + 1 candidates of c, best first, once their probabilities add
 * up to p (and at least min_keep are kept); 0 if they never do. */
static size_t top_p_cut(const bg_candidate *c, size_t n, float p, size_t min_keep)
{
    float cum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum >= p && i + 1 >= min_keep)
            return i + 1;
    }
    return 0;
}

static void apply_top_p(brigade_sampler *s)
{
    const float p = s->opts.top_p;
    const size_t min_keep = (size_t)s->opts.min_keep;
    softmax_float(s);
    if (s->sorted) {
        size_t last = top_p_cut(s->cand, s->n_cand, p, min_keep);
        if (last)
            s->n_cand = last;
        return;
    }
    /* Unsorted: the best 256 usually suffice; else more, up to all. The
     * cumulative sums run over the same sequence however many are taken. */
    for (size_t m = 256;; m *= 16) {
        size_t n = select_best(s, m);
        size_t last = top_p_cut(s->work, n, p, min_keep);
        if (last || n == s->n_cand) {
            if (!last)
                last = n;
            memcpy(s->cand, s->work, last * sizeof *s->cand);
            s->n_cand = last;
            s->sorted = true;
            return;
        }
    }
}

static void apply_min_p(brigade_sampler *s)
{
    bg_candidate *c = s->cand;
    const size_t min_keep = (size_t)s->opts.min_keep;
    const float lp = logf(s->opts.min_p);
    if (!s->sorted) {
        /* In place and in id order, as llama.cpp's unsorted path. */
        float max = -FLT_MAX;
        for (size_t i = 0; i < s->n_cand; i++)
            if (c[i].logit > max)
                max = c[i].logit;
        const float floor = max + lp;
        size_t kept = 0;
        for (size_t i = 0; i < s->n_cand; i++)
            kept += c[i].logit >= floor;
        if (kept > 0 && kept >= min_keep) {
            size_t k = 0;
            for (size_t i = 0; i < s->n_cand; i++)
                if (c[i].logit >= floor)
                    c[k++] = c[i];
            s->n_cand = k;
            return;
        }
        /* Too few: the best max(kept, min_keep) of the sorted list. */
        keep_best(s, kept > min_keep ? kept : min_keep > 0 ? min_keep : 1);
        return;
    }
    const float floor = c[0].logit + lp;
    size_t i = 1; /* the best always stays */
    while (i < s->n_cand && (c[i].logit >= floor || i < min_keep))
        i++;
    s->n_cand = i;
}

/* dist's normalization: float exponentials, a double sum. */
static brigade_status normalize(brigade_sampler *s, brigade_error *err)
{
    bg_candidate *c = s->cand;
    if (s->n_cand == 1) {
        c[0].p = 1.0f;
        return BRIGADE_OK;
    }
    float max = c[0].logit;
    for (size_t i = 1; !s->sorted && i < s->n_cand; i++)
        if (c[i].logit > max)
            max = c[i].logit;
    if (max == -INFINITY)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: every logit is -inf after the penalties");
    double sum = 0.0;
    for (size_t i = 0; i < s->n_cand; i++) {
        c[i].p = expf(c[i].logit - max);
        sum += c[i].p;
    }
    for (size_t i = 0; i < s->n_cand; i++)
        c[i].p = (float)(c[i].p / sum);
    return BRIGADE_OK;
}

brigade_status bg_sampler_candidates(brigade_sampler *s, const float *logits,
                                     const bg_candidate **out, size_t *n_out, brigade_error *err)
{
    if (!s || !logits)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: no %s", s ? "logits" : "sampler");
    const brigade_sampling_options *o = &s->opts;
    brigade_status st;
    if (o->temp <= 0.0f) {
        /* Greedy: every stage keeps the best token, the one left. */
        if ((st = take_best_logits(s, logits, 1, err)))
            return st;
        s->cand[0].p = 1.0f;
    } else {
        if (o->top_k > 0 && o->top_k <= HEAP_MAX && o->top_k < s->n_vocab) {
            if ((st = take_best_logits(s, logits, (size_t)o->top_k, err)))
                return st;
        } else {
            if ((st = check_logits(logits, s->n_vocab, err)))
                return st;
            take_all_logits(s, logits);
            if (o->top_k > 0) /* at k >= n_vocab, llama.cpp sorts them all */
                keep_best(s, (size_t)o->top_k);
        }
        if (o->top_p < 1.0f)
            apply_top_p(s);
        if (o->min_p > 0.0f)
            apply_min_p(s);
        if (o->temp != 1.0f)
            for (size_t i = 0; i < s->n_cand; i++)
                s->cand[i].logit /= o->temp;
        st = normalize(s, err);
        if (st)
            return st;
    }
    if (out)
        *out = s->cand;
    if (n_out)
        *n_out = s->n_cand;
    return BRIGADE_OK;
}

brigade_status brigade_sampler_sample(brigade_sampler *s, const float *logits, int32_t *token_out,
                                      brigade_error *err)
{
    if (!token_out)
        return bg_fail(err, BRIGADE_ERR_ARG, "sampling: no place for the token (token_out is NULL)");
    const bg_candidate *c;
    size_t n;
    brigade_status st = bg_sampler_candidates(s, logits, &c, &n, err);
    if (st)
        return st;
    size_t pick = 0;
    if (n > 1) {
        /* The first candidate whose cumulative probability passes u; a
         * candidate of probability 0 is never chosen. */
        const double u = rng_uniform(s->rng);
        double run = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (c[i].p > 0.0f) {
                pick = i;
                run += c[i].p;
                if (run > u)
                    break;
            }
        }
    }
    *token_out = c[pick].id;
    return BRIGADE_OK;
}
