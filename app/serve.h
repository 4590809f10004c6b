/* brigade serve: an OpenAI-compatible HTTP server.
 *
 *   serve.c        the command: options, start-up, signals, shutdown
 *   serve_http.c   HTTP (libmicrohttpd): routes, keys, limits, SSE
 *   serve_api.c    the OpenAI API over JSON (jansson): requests checked
 *                  into tasks, results written as responses and chunks
 *   serve_sched.c  the slots: one thread evaluates every active request
 *                  together, one batched step at a time
 *
 * A task is one generation request, shared by the connection that made it
 * and the scheduler: each holds a reference, the last release frees it. */
#ifndef BRIGADE_SERVE_H
#define BRIGADE_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* ------------------------------------------------------------ byte buffer */

typedef struct srv_buf {
    char *data; /* NUL-terminated when not NULL */
    size_t len, cap;
    bool failed; /* an allocation failed: the content is incomplete */
} srv_buf;

void srv_buf_add(srv_buf *b, const char *s, size_t n);
void srv_buf_adds(srv_buf *b, const char *s);
void srv_buf_free(srv_buf *b);

/* ------------------------------------------- JSON-constrained generation */

#define SRV_JSON_MAX_DEPTH 64

/* Where a JSON object's text has got to (serve_json.c). Zeroed: nothing
 * read yet; the top level must be an object. */
typedef struct srv_json {
    int state, aux, lit;
    bool in_key;
    int depth;
    char stack[SRV_JSON_MAX_DEPTH]; /* '{' or '[' */
} srv_json;

/* Reads more text; false if it cannot continue a JSON object (j is then
 * left part-way and must not be used). */
bool srv_json_feed(srv_json *j, const char *text, size_t len);
/* The object is complete. */
bool srv_json_done(const srv_json *j);
/* out = logits, with -inf for every token whose text cannot come next. */
void srv_json_mask(const srv_json *j, const brigade_vocab *vocab, const float *logits, float *out,
                   int32_t n_vocab);

/* ------------------------------------------------------------------ tasks */

typedef enum srv_finish {
    SRV_FINISH_NONE = 0,
    SRV_FINISH_STOP,     /* end-of-generation token or a stop string */
    SRV_FINISH_LENGTH,   /* max_tokens or a full context */
    SRV_FINISH_CANCEL,   /* the client went away */
    SRV_FINISH_SHUTDOWN, /* the server stopped before the end */
    SRV_FINISH_ERROR,
} srv_finish;

typedef struct srv_task {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    /* the request, fixed once submitted */
    int32_t *prompt;
    size_t n_prompt;
    brigade_sampler *sampler;
    brigade_detok *detok;
    uint32_t ckpt_at;   /* 0 or a prompt length where a checkpoint pays off too:
                         * where the next turn's prompt will part from this one */
    int32_t max_tokens; /* < 0: until the context is full */
    char **stop;        /* stop strings */
    size_t n_stop;
    bool json_mode;     /* response_format json_object */
    atomic_bool cancel; /* set by the connection when its client is gone */
    /* the scheduler's own */
    srv_buf held; /* text held back while it may begin a stop string */
    bool stop_hit; /* a stop string ended the text */
    srv_json json; /* json_mode: the object so far */
    int32_t n_generated;
    struct srv_task *next;
    /* results, under mu */
    srv_buf text; /* generated text released so far */
    bool done;
    srv_finish finish;
    char error[BRIGADE_ERROR_MAX];
    size_t n_cached, n_tokens_out;
    uint32_t slot;
    double t_submit, t_start, t_prompt_end, t_end; /* seconds, monotonic */
} srv_task;

srv_task *srv_task_new(void);
void srv_task_unref(srv_task *t);
/* Waits until the task has text beyond `have` bytes or is done, or until
 * timeout_ms pass; returns whether it is done. */
bool srv_task_wait(srv_task *t, size_t have, int timeout_ms);

double srv_now(void);

/* -------------------------------------------------------------- scheduler */

typedef struct srv_sched srv_sched;

typedef struct srv_sched_options {
    uint32_t n_slots;       /* sequences decoded together */
    uint32_t max_queue;     /* requests waiting for a slot before 503 */
    uint32_t n_batch;       /* tokens evaluated per step at most */
    uint32_t n_checkpoints; /* recurrent-state checkpoints kept per slot */
    bool verbose;
} srv_sched_options;

typedef struct srv_metrics {
    uint64_t requests, prompt_tokens, cached_tokens, generated_tokens, steps;
    double prompt_seconds, gen_seconds; /* summed over requests */
    uint32_t processing, deferred, n_slots;
} srv_metrics;

/* Takes ownership of the session (n_seq_max >= n_slots). */
brigade_status srv_sched_start(const brigade_model *model, brigade_session *session,
                               const brigade_vocab *vocab, const srv_sched_options *opts,
                               srv_sched **out, brigade_error *err);
typedef enum srv_submit { SRV_SUBMIT_OK, SRV_SUBMIT_FULL, SRV_SUBMIT_STOPPING } srv_submit;
/* Queues a task; on success the scheduler holds a reference of its own. */
srv_submit srv_sched_submit(srv_sched *s, srv_task *t);
uint32_t srv_sched_n_ctx(const srv_sched *s);
void srv_sched_metrics(srv_sched *s, srv_metrics *out);
/* Stops taking requests: queued ones end with SRV_FINISH_SHUTDOWN, running
 * ones may finish within grace seconds, then are stopped; the thread ends. */
void srv_sched_stop(srv_sched *s, double grace);
void srv_sched_free(srv_sched *s);

/* -------------------------------------------------------------- the API */

typedef struct srv_state srv_state;

typedef struct srv_response {
    unsigned status;
    srv_buf body;                  /* a complete body ... */
    const char *content_type;
    struct srv_stream *stream;     /* ... or a stream of SSE chunks */
} srv_response;

/* What a streamed response needs from the connection. */
typedef struct srv_stream srv_stream;
/* Appends to out the SSE bytes that are ready; waits up to timeout_ms for
 * more. Returns false once the stream is complete (out may still have the
 * last bytes). */
bool srv_stream_next(srv_stream *st, srv_buf *out, int timeout_ms);
/* The client left or the response is done with: cancels the task. */
void srv_stream_free(srv_stream *st);

/* Waits for a task: returns false when alive() says the client left (the
 * task is then cancelled). */
typedef bool (*srv_alive_fn)(void *user);

void srv_api_route(srv_state *st, const char *method, const char *path, const char *body,
                   size_t body_len, srv_alive_fn alive, void *alive_user, srv_response *out);
/* An OpenAI-style error body. */
void srv_api_error(srv_response *out, unsigned status, const char *type, const char *message);

/* ------------------------------------------------------------------ HTTP */

typedef struct srv_http srv_http;

typedef struct srv_http_options {
    const char *host; /* address or host name */
    unsigned port;    /* 0: any free port (see srv_http_port) */
    size_t body_limit;
    char **keys; /* accepted API keys; none: no key needed */
    size_t n_keys;
    bool verbose;
} srv_http_options;

/* Starts listening; requests are answered from st (503 until it is ready). */
srv_http *srv_http_start(srv_state *st, const srv_http_options *o, char *err, size_t err_size);
unsigned srv_http_port(const srv_http *h);
/* Stops accepting connections; those open go on. */
void srv_http_quiesce(srv_http *h);
/* Waits up to drain seconds for answers being sent, then closes everything. */
void srv_http_stop(srv_http *h, double drain);

struct srv_state {
    atomic_bool ready; /* the model is loaded */
    atomic_bool stopping;
    const char *alias;
    const char *model_path;
    brigade_model *model;
    brigade_vocab *vocab;
    brigade_chat_template *tmpl;
    srv_sched *sched;
    uint32_t n_ctx;
    bool metrics;
    double started;                   /* wall-clock seconds */
    brigade_sampling_options sampling; /* defaults from the command line */
    int32_t n_predict;                /* default max_tokens; -1: none */
    bool no_think;                    /* default enable_thinking=false */
    atomic_uint_fast64_t http_requests, http_errors;
};

#endif
