/* The slots: each holds one sequence of the session. One thread runs the
 * steps: every active slot contributes its next tokens (a generating slot
 * one, a slot reading its prompt a chunk), the batch is evaluated in one
 * forward pass, and each slot whose logits came back samples its next
 * token. A request that arrives joins at the next step.
 *
 * A slot keeps its sequence after a request. The next request it takes
 * resumes from the longest prefix it can restore exactly: attention KV can
 * be cut at any length; the recurrent state only at the end of the slot's
 * content or at a checkpoint. Checkpoints are taken one token before the
 * end of every prompt (so the same prompt again evaluates only its last
 * token, for the logits) and, for chats, where the conversation so far ends
 * and the opening of the assistant's turn begins: the next turn's prompt
 * parts from this one there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_buf_add(srv_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void srv_buf_adds(srv_buf *b, const char *s) { srv_buf_add(b, s, strlen(s)); }

void srv_buf_free(srv_buf *b)
{
    free(b->data);
    *b = (srv_buf){0};
}

/* ------------------------------------------------------------------ tasks */

srv_task *srv_task_new(void)
{
    srv_task *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->refs = 1;
    t->max_tokens = -1;
    atomic_init(&t->cancel, false);
    return t;
}

void srv_task_unref(srv_task *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    int left = --t->refs;
    pthread_mutex_unlock(&t->mu);
    if (left)
        return;
    free(t->prompt);
    brigade_sampler_free(t->sampler);
    brigade_detok_free(t->detok);
    for (size_t i = 0; i < t->n_stop; i++)
        free(t->stop[i]);
    free(t->stop);
    srv_buf_free(&t->held);
    srv_buf_free(&t->text);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

bool srv_task_wait(srv_task *t, size_t have, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->done && t->text.len <= have)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT)
            break;
    bool done = t->done;
    pthread_mutex_unlock(&t->mu);
    return done;
}

/* -------------------------------------------------------------- scheduler */

typedef struct checkpoint {
    uint32_t n_past; /* 0: unused */
    void *state;
} checkpoint;

typedef struct slot {
    uint32_t id;
    srv_task *task;     /* NULL: idle */
    int32_t *tokens;    /* [n_ctx] what the sequence holds */
    uint32_t n_tokens;
    size_t prompt_done; /* prompt tokens the sequence holds */
    bool generating;
    int32_t next;       /* sampled, evaluated at the next step */
    checkpoint *ckpt;   /* [n_checkpoints] */
    uint64_t last_used;
} slot;

struct srv_sched {
    const brigade_model *model;
    brigade_session *session;
    const brigade_vocab *vocab;
    srv_sched_options o;
    uint32_t n_ctx, n_vocab;
    uint64_t ckpt_bytes;
    slot *slots;
    /* one step's batch */
    int32_t *b_tok;
    uint32_t *b_seq;
    bool *b_want;
    slot **b_slot; /* [n_batch] the slot of each token */
    float *logits; /* [n_slots][n_vocab] */
    float *masked; /* [n_vocab] a row constrained to JSON */
    uint64_t clock;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards what follows */
    pthread_cond_t cv;
    srv_task *head, *tail;
    uint32_t queued, active;
    bool stopping;
    double stop_deadline;
    srv_metrics m;
};

static bool emit(srv_task *t, const char *text, size_t len);

static void task_finish(srv_sched *s, slot *sl, srv_finish why, const char *error)
{
    srv_task *t = sl->task;
    if (!t->stop_hit && why != SRV_FINISH_CANCEL && why != SRV_FINISH_ERROR) {
        /* what the detokenizer and the stop-string check still hold, unless
         * a stop string ended the text */
        const char *rest = NULL;
        size_t n = 0;
        if (t->detok)
            brigade_detok_flush(t->detok, &rest, &n);
        if (!emit(t, rest, n) && t->held.len) {
            pthread_mutex_lock(&t->mu);
            srv_buf_add(&t->text, t->held.data, t->held.len);
            pthread_mutex_unlock(&t->mu);
        }
    }
    pthread_mutex_lock(&t->mu);
    t->finish = why;
    if (error)
        snprintf(t->error, sizeof t->error, "%s", error);
    t->n_tokens_out = (size_t)t->n_generated;
    t->t_end = srv_now();
    if (!t->t_prompt_end)
        t->t_prompt_end = t->t_end;
    t->done = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&s->mu);
    s->active--;
    s->m.generated_tokens += (uint64_t)t->n_generated;
    s->m.gen_seconds += t->t_end - t->t_prompt_end;
    pthread_mutex_unlock(&s->mu);
    sl->task = NULL;
    sl->generating = false;
    sl->last_used = ++s->clock;
    srv_task_unref(t);
}

/* Whether text ends with the start of a stop string: how many bytes to hold. */
static size_t stop_overlap(const srv_task *t, const char *text, size_t len)
{
    size_t best = 0;
    for (size_t i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        if (!sl)
            continue;
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > best; k--)
            if (!memcmp(text + len - k, t->stop[i], k)) {
                best = k;
                break;
            }
    }
    return best;
}

static const char *find(const char *h, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; k && i + k <= n; i++)
        if (h[i] == needle[0] && !memcmp(h + i, needle, k))
            return h + i;
    return NULL;
}

/* New text from the detokenizer: released unless it may be (or is) a stop
 * string. Returns true when a stop string ended the text. */
static bool emit(srv_task *t, const char *text, size_t len)
{
    srv_buf_add(&t->held, text, len);
    if (!t->held.data || !t->held.len)
        return false;
    const char *h = t->held.data;
    size_t n = t->held.len, cut = n;
    bool stopped = false;
    for (size_t i = 0; i < t->n_stop; i++) {
        const char *at = find(h, n, t->stop[i]);
        if (at && (size_t)(at - h) < cut) {
            cut = (size_t)(at - h);
            stopped = true;
        }
    }
    size_t release = stopped ? cut : n - stop_overlap(t, h, n);
    if (release) {
        pthread_mutex_lock(&t->mu);
        srv_buf_add(&t->text, h, release);
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
    if (stopped) {
        t->held.len = 0;
        t->stop_hit = true;
    } else {
        memmove(t->held.data, h + release, n - release);
        t->held.len = n - release;
    }
    t->held.data[t->held.len] = 0;
    return stopped;
}

static bool is_recurrent(const srv_sched *s) { return s->ckpt_bytes > 0; }

static void save_checkpoint(srv_sched *s, slot *sl)
{
    checkpoint *c = NULL;
    for (uint32_t i = 0; i < s->o.n_checkpoints; i++) {
        checkpoint *k = &sl->ckpt[i];
        if (k->n_past == sl->n_tokens)
            return;
        if (!c || k->n_past < c->n_past) /* a free one, else the oldest */
            c = k;
    }
    if (c && brigade_session_seq_save(s->session, sl->id, c->state, s->ckpt_bytes, NULL) ==
                 BRIGADE_OK)
        c->n_past = sl->n_tokens;
}

/* Tokens of the prompt the slot can keep: see the top of the file. Returns
 * the length and the checkpoint to restore (NULL: none needed). */
static uint32_t reusable(const srv_sched *s, const slot *sl, const srv_task *t,
                         const checkpoint **restore)
{
    *restore = NULL;
    uint32_t lcp = 0, cap = (uint32_t)t->n_prompt - 1; /* the last prompt token is evaluated */
    while (lcp < sl->n_tokens && lcp < cap && sl->tokens[lcp] == t->prompt[lcp])
        lcp++;
    if (!is_recurrent(s) || lcp == sl->n_tokens)
        return lcp;
    const checkpoint *best = NULL;
    for (uint32_t i = 0; i < s->o.n_checkpoints; i++) {
        const checkpoint *c = &sl->ckpt[i];
        if (c->n_past && c->n_past <= lcp && (!best || c->n_past > best->n_past))
            best = c;
    }
    *restore = best;
    return best ? best->n_past : 0;
}

/* Puts a queued task in the idle slot that keeps the most of its prompt
 * (the least recently used among equals). Under s->mu. */
static slot *pick_slot(srv_sched *s, const srv_task *t)
{
    slot *best = NULL;
    uint32_t best_keep = 0;
    for (uint32_t i = 0; i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->task)
            continue;
        const checkpoint *c;
        uint32_t keep = reusable(s, sl, t, &c);
        if (!best || keep > best_keep || (keep == best_keep && sl->last_used < best->last_used)) {
            best = sl;
            best_keep = keep;
        }
    }
    return best;
}

/* Rolls the slot's sequence back to what the task can reuse. */
static void start_task(srv_sched *s, slot *sl, srv_task *t)
{
    const checkpoint *c;
    uint32_t keep = reusable(s, sl, t, &c);
    brigade_error err;
    bool ok = true;
    if (c)
        ok = brigade_session_seq_restore(s->session, sl->id, c->state, s->ckpt_bytes, keep, &err) ==
             BRIGADE_OK;
    else if (keep < sl->n_tokens)
        ok = brigade_session_seq_truncate(s->session, sl->id, keep, &err) == BRIGADE_OK;
    if (!ok) {
        brigade_session_seq_clear(s->session, sl->id);
        keep = 0;
    }
    sl->n_tokens = keep;
    /* checkpoints past the kept prefix no longer match the cache */
    for (uint32_t i = 0; i < s->o.n_checkpoints; i++)
        if (sl->ckpt[i].n_past > keep)
            sl->ckpt[i].n_past = 0;
    sl->task = t;
    sl->prompt_done = keep;
    sl->generating = false;
    if (is_recurrent(s) && keep && (keep + 1 == t->n_prompt || keep == t->ckpt_at))
        save_checkpoint(s, sl);
    pthread_mutex_lock(&t->mu);
    t->n_cached = keep;
    t->slot = sl->id;
    t->t_start = srv_now();
    pthread_mutex_unlock(&t->mu);
    if (s->o.verbose)
        fprintf(stderr, "serve: slot %u takes a request of %zu prompt tokens, %u cached\n", sl->id,
                t->n_prompt, keep);
}

/* Accepted once the prompt is in: the penalties look at its last tokens. */
static void accept_prompt(srv_task *t)
{
    size_t from = t->n_prompt > 256 ? t->n_prompt - 256 : 0;
    for (size_t i = from; i < t->n_prompt; i++)
        brigade_sampler_accept(t->sampler, t->prompt[i], NULL);
}

/* After a step: the slot's logits row gives its next token. */
static void sample_next(srv_sched *s, slot *sl, const float *logits)
{
    srv_task *t = sl->task;
    brigade_error err;
    if (!sl->generating) {
        pthread_mutex_lock(&t->mu);
        t->t_prompt_end = srv_now();
        pthread_mutex_unlock(&t->mu);
        pthread_mutex_lock(&s->mu);
        s->m.prompt_tokens += t->n_prompt - t->n_cached;
        s->m.cached_tokens += t->n_cached;
        s->m.prompt_seconds += t->t_prompt_end - t->t_start;
        pthread_mutex_unlock(&s->mu);
        accept_prompt(t);
        sl->generating = true;
    }
    if (t->max_tokens >= 0 && t->n_generated >= t->max_tokens) {
        task_finish(s, sl, SRV_FINISH_LENGTH, NULL);
        return;
    }
    int32_t tok;
    if (t->json_mode) {
        srv_json_mask(&t->json, s->vocab, logits, s->masked, (int32_t)s->n_vocab);
        logits = s->masked;
    }
    if (brigade_sampler_sample(t->sampler, logits, &tok, &err)) {
        task_finish(s, sl, SRV_FINISH_ERROR, err.message);
        return;
    }
    if (brigade_vocab_is_eog(s->vocab, tok)) {
        task_finish(s, sl, SRV_FINISH_STOP, NULL);
        return;
    }
    brigade_sampler_accept(t->sampler, tok, NULL);
    t->n_generated++;
    const char *text;
    size_t len;
    if (brigade_detok_push(t->detok, tok, &text, &len, &err)) {
        task_finish(s, sl, SRV_FINISH_ERROR, err.message);
        return;
    }
    if (len && emit(t, text, len)) {
        task_finish(s, sl, SRV_FINISH_STOP, NULL);
        return;
    }
    if (t->json_mode) {
        brigade_string piece = brigade_token_piece(s->vocab, tok, false);
        srv_json_feed(&t->json, piece.ptr, piece.len);
        if (srv_json_done(&t->json)) {
            task_finish(s, sl, SRV_FINISH_STOP, NULL);
            return;
        }
    }
    if ((t->max_tokens >= 0 && t->n_generated >= t->max_tokens) || sl->n_tokens >= s->n_ctx) {
        task_finish(s, sl, SRV_FINISH_LENGTH, NULL);
        return;
    }
    sl->next = tok;
}

/* Ends a task that never reached a slot. */
static void end_queued(srv_task *t, srv_finish why, const char *error)
{
    pthread_mutex_lock(&t->mu);
    t->finish = why;
    if (error)
        snprintf(t->error, sizeof t->error, "%s", error);
    t->t_start = t->t_prompt_end = t->t_end = srv_now();
    t->done = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    srv_task_unref(t);
}

/* Admits queued tasks into idle slots; ends queued tasks when stopping and
 * those whose client left. */
static void admit(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->head) {
        srv_task *t = s->head;
        bool gone = atomic_load(&t->cancel);
        slot *sl = s->stopping || gone ? NULL : pick_slot(s, t);
        if (!sl && !s->stopping && !gone)
            break;
        s->head = t->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        t->next = NULL;
        if (sl) {
            s->active++;
            s->m.requests++;
        }
        pthread_mutex_unlock(&s->mu);
        if (sl)
            start_task(s, sl, t);
        else if (gone)
            end_queued(t, SRV_FINISH_CANCEL, NULL);
        else
            end_queued(t, SRV_FINISH_SHUTDOWN, "the server is shutting down");
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

/* One step over every active slot. */
static void step(srv_sched *s)
{
    size_t n = 0;
    uint32_t budget = s->o.n_batch;
    bool deadline = false;
    pthread_mutex_lock(&s->mu);
    deadline = s->stopping && srv_now() >= s->stop_deadline;
    pthread_mutex_unlock(&s->mu);
    /* generating slots first: one token each */
    for (uint32_t i = 0; i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->task)
            continue;
        if (atomic_load(&sl->task->cancel)) {
            task_finish(s, sl, SRV_FINISH_CANCEL, NULL);
            continue;
        }
        if (deadline) {
            task_finish(s, sl, SRV_FINISH_SHUTDOWN, "the server is shutting down");
            continue;
        }
        if (!sl->generating || !budget)
            continue;
        s->b_tok[n] = sl->next;
        s->b_seq[n] = sl->id;
        s->b_want[n] = true;
        s->b_slot[n++] = sl;
        budget--;
    }
    /* then prompt chunks, stopping at the checkpoints of a recurrent model */
    for (uint32_t i = 0; i < s->o.n_slots && budget; i++) {
        slot *sl = &s->slots[i];
        if (!sl->task || sl->generating)
            continue;
        srv_task *t = sl->task;
        size_t end = t->n_prompt;
        if (is_recurrent(s) && sl->prompt_done + 1 < t->n_prompt)
            end = sl->prompt_done < t->ckpt_at ? t->ckpt_at : t->n_prompt - 1;
        size_t k = end - sl->prompt_done;
        if (k > budget)
            k = budget;
        for (size_t j = 0; j < k; j++) {
            s->b_tok[n] = t->prompt[sl->prompt_done + j];
            s->b_seq[n] = sl->id;
            s->b_want[n] = sl->prompt_done + j + 1 == t->n_prompt;
            s->b_slot[n++] = sl;
        }
        budget -= (uint32_t)k;
    }
    if (!n)
        return;
    brigade_batch b = {.tokens = s->b_tok, .seq = s->b_seq, .logits = s->b_want, .n = n};
    brigade_error err;
    if (brigade_session_eval_batch(s->session, &b, s->logits, &err)) {
        fprintf(stderr, "serve: evaluation failed: %s\n", err.message);
        for (size_t i = 0; i < n; i++) {
            slot *sl = s->b_slot[i];
            if (sl->task)
                task_finish(s, sl, SRV_FINISH_ERROR, err.message);
            brigade_session_seq_clear(s->session, sl->id);
            sl->n_tokens = 0;
            for (uint32_t c = 0; c < s->o.n_checkpoints; c++)
                sl->ckpt[c].n_past = 0;
        }
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->m.steps++;
    pthread_mutex_unlock(&s->mu);
    size_t row = 0;
    for (size_t i = 0; i < n; i++) {
        slot *sl = s->b_slot[i];
        sl->tokens[sl->n_tokens++] = s->b_tok[i];
        if (!sl->generating)
            sl->prompt_done++;
        if (!s->b_want[i]) {
            /* a chunk that ends one token before its prompt's end */
            bool last_of_slot = i + 1 == n || s->b_slot[i + 1] != sl;
            if (last_of_slot && is_recurrent(s) &&
                (sl->prompt_done + 1 == sl->task->n_prompt || sl->prompt_done == sl->task->ckpt_at))
                save_checkpoint(s, sl);
            continue;
        }
        sample_next(s, sl, s->logits + row++ * (size_t)s->n_vocab);
    }
}

static bool any_active(const srv_sched *s)
{
    for (uint32_t i = 0; i < s->o.n_slots; i++)
        if (s->slots[i].task)
            return true;
    return false;
}

static void *run(void *arg)
{
    srv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->head && !any_active(s))
            pthread_cond_wait(&s->cv, &s->mu);
        bool end = s->stopping && !s->head && !any_active(s);
        pthread_mutex_unlock(&s->mu);
        if (end)
            break;
        admit(s);
        step(s);
    }
    return NULL;
}

brigade_status srv_sched_start(const brigade_model *model, brigade_session *session,
                               const brigade_vocab *vocab, const srv_sched_options *opts,
                               srv_sched **out, brigade_error *err)
{
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) {
        brigade_session_free(session);
        snprintf(err->message, sizeof err->message, "out of memory");
        return err->status = BRIGADE_ERR_NOMEM;
    }
    s->model = model;
    s->session = session;
    s->vocab = vocab;
    s->o = *opts;
    if (!s->o.n_batch)
        s->o.n_batch = 512;
    if (s->o.n_batch < s->o.n_slots)
        s->o.n_batch = s->o.n_slots;
    s->n_ctx = brigade_session_n_ctx(session);
    s->n_vocab = brigade_model_n_vocab(model);
    s->ckpt_bytes = brigade_session_checkpoint_bytes(session);
    if (!s->ckpt_bytes)
        s->o.n_checkpoints = 0;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    bool ok = (s->slots = calloc(s->o.n_slots, sizeof *s->slots)) &&
              (s->b_tok = malloc(s->o.n_batch * sizeof *s->b_tok)) &&
              (s->b_seq = malloc(s->o.n_batch * sizeof *s->b_seq)) &&
              (s->b_want = malloc(s->o.n_batch * sizeof *s->b_want)) &&
              (s->b_slot = malloc(s->o.n_batch * sizeof *s->b_slot)) &&
              (s->logits = brigade_logits_alloc(session, s->o.n_slots)) &&
              (s->masked = malloc((size_t)s->n_vocab * sizeof(float)));
    for (uint32_t i = 0; ok && i < s->o.n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->id = i;
        ok = (sl->tokens = malloc((size_t)s->n_ctx * sizeof(int32_t))) &&
             (sl->ckpt = calloc(s->o.n_checkpoints ? s->o.n_checkpoints : 1, sizeof *sl->ckpt));
        for (uint32_t c = 0; ok && c < s->o.n_checkpoints; c++)
            ok = (sl->ckpt[c].state = malloc(s->ckpt_bytes)) != NULL;
    }
    if (ok && pthread_create(&s->thread, NULL, run, s) == 0)
        s->started = true;
    if (!s->started) {
        srv_sched_free(s);
        snprintf(err->message, sizeof err->message, "out of memory for %u slots", opts->n_slots);
        return err->status = BRIGADE_ERR_NOMEM;
    }
    *out = s;
    return BRIGADE_OK;
}

srv_submit srv_sched_submit(srv_sched *s, srv_task *t)
{
    pthread_mutex_lock(&s->mu);
    srv_submit r = SRV_SUBMIT_OK;
    uint32_t free_slots = s->o.n_slots - s->active;
    if (s->stopping)
        r = SRV_SUBMIT_STOPPING;
    else if (s->queued >= free_slots + s->o.max_queue)
        r = SRV_SUBMIT_FULL;
    else {
        pthread_mutex_lock(&t->mu);
        t->refs++;
        t->t_submit = srv_now();
        pthread_mutex_unlock(&t->mu);
        if (s->tail)
            s->tail->next = t;
        else
            s->head = t;
        s->tail = t;
        s->queued++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

uint32_t srv_sched_n_ctx(const srv_sched *s) { return s->n_ctx; }

void srv_sched_metrics(srv_sched *s, srv_metrics *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->m;
    out->processing = s->active;
    out->deferred = s->queued;
    out->n_slots = s->o.n_slots;
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_stop(srv_sched *s, double grace)
{
    pthread_mutex_lock(&s->mu);
    if (!s->stopping) {
        s->stopping = true;
        s->stop_deadline = srv_now() + grace;
    }
    pthread_cond_signal(&s->cv);
    bool join = s->started;
    s->started = false;
    pthread_mutex_unlock(&s->mu);
    if (join)
        pthread_join(s->thread, NULL);
}

void srv_sched_free(srv_sched *s)
{
    if (!s)
        return;
    srv_sched_stop(s, 0);
    for (uint32_t i = 0; s->slots && i < s->o.n_slots; i++) {
        for (uint32_t c = 0; s->slots[i].ckpt && c < s->o.n_checkpoints; c++)
            free(s->slots[i].ckpt[c].state);
        free(s->slots[i].ckpt);
        free(s->slots[i].tokens);
    }
    free(s->slots);
    free(s->b_tok);
    free(s->b_seq);
    free(s->b_want);
    free(s->b_slot);
    brigade_logits_free(s->logits);
    free(s->masked);
    brigade_session_free(s->session);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
