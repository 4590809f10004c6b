/* What `run` and `chat` share: loading a model with its tokenizer and chat
 * template, the common flags, and the loop that evaluates a prompt and
 * streams generated text until an end-of-generation token, the token limit
 * or a full context. */
#ifndef BRIGADE_GENERATE_H
#define BRIGADE_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

typedef struct gen_flags {
    const char *model_path;
    brigade_model_options model;
    brigade_session_options session;
    brigade_sampling_options sampling;
    int32_t n_predict; /* -1: until end of generation or a full context */
    const char *system;
    bool no_think;
    bool verbose;
} gen_flags;

void gen_flags_init(gen_flags *f);
/* Parses one flag shared by run and chat at argv[*i] (advancing *i past its
 * value). Returns 1 if taken, 0 if not a shared flag, -1 on a bad value
 * (already reported). */
int gen_parse_flag(gen_flags *f, int argc, char **argv, int *i);
void gen_flags_usage(FILE *out);

typedef struct gen_engine {
    brigade_model *model;
    brigade_session *session;
    brigade_vocab *vocab;
    brigade_chat_template *tmpl;
    brigade_sampler *sampler;
    float *logits;
    int32_t *evaluated; /* the tokens the session holds, for prefix reuse */
    size_t n_evaluated;
    double load_seconds;
} gen_engine;

/* Loads everything, with progress and the template warning on stderr. */
bool gen_engine_open(gen_engine *e, const gen_flags *f);
void gen_engine_close(gen_engine *e);

typedef enum gen_stop { GEN_STOP_EOG, GEN_STOP_LIMIT, GEN_STOP_LENGTH, GEN_STOP_INTERRUPT,
                        GEN_STOP_ERROR } gen_stop;

typedef struct gen_stats {
    size_t n_prompt, n_reused, n_generated;
    double prompt_seconds, gen_seconds;
} gen_stats;

/* Receives generated text as it becomes complete UTF-8. */
typedef void (*gen_text_fn)(void *user, const char *text, size_t len);

/* Evaluates the prompt (reusing the longest evaluated prefix when the state
 * allows) and generates up to n_predict tokens. *interrupt set from a signal
 * handler stops generation early. The generated ids are appended to
 * e->evaluated as they are evaluated. */
gen_stop gen_run(gen_engine *e, const int32_t *prompt, size_t n_prompt, int32_t n_predict,
                 gen_text_fn on_text, void *user, volatile sig_atomic_t *interrupt,
                 gen_stats *stats, brigade_error *err);

/* Tokenizes text (parse_special as for rendered chat prompts); malloc'd. */
int32_t *gen_tokenize(const gen_engine *e, const char *text, size_t len, bool add_special,
                      size_t *n, brigade_error *err);

void gen_print_stats(const gen_engine *e, const gen_stats *s);

/* Shows parsed output as it streams: reasoning set apart on its own stream
 * (dimmed on a terminal, else between the given marks), the answer on
 * stdout, tool calls as "[tool call] name {arguments}" lines. */
typedef struct gen_view {
    FILE *reasoning_out;
    bool dim;
    const char *open_mark, *close_mark; /* used when not dimming */
    bool in_reasoning;
} gen_view;

void gen_view_show(gen_view *v, const brigade_chat_delta *d);
/* Closes a reasoning block left open and ends the line. */
void gen_view_end(gen_view *v);
const char *gen_stop_name(gen_stop stop);

#endif
