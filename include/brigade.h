/* brigade: LLM inference for Mixture-of-Experts models in GGUF files.
 *
 * The public API. Every call that can fail returns a brigade_status and, when
 * given a brigade_error, fills it with a message that says what was wrong and
 * where (file, key, tensor, byte offset). The library never prints to stdout
 * and never exits. */
#ifndef BRIGADE_H
#define BRIGADE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

typedef enum brigade_status {
    BRIGADE_OK = 0,
    BRIGADE_ERR_IO,          /* open, read, write or map failed */
    BRIGADE_ERR_FORMAT,      /* the file's content is invalid */
    BRIGADE_ERR_UNSUPPORTED, /* valid, but not something brigade handles */
    BRIGADE_ERR_NOMEM,       /* an allocation failed */
    BRIGADE_ERR_ARG,         /* the caller passed something invalid */
    BRIGADE_ERR_CANCELLED,   /* a progress callback asked to stop */
} brigade_status;

#define BRIGADE_ERROR_MAX 512

typedef struct brigade_error {
    brigade_status status;
    char message[BRIGADE_ERROR_MAX];
} brigade_error;

const char *brigade_status_name(brigade_status status);

/* ------------------------------------------------------------- GGUF files */

/* Metadata value types, numbered as in GGUF. */
typedef enum brigade_value_type {
    BRIGADE_VALUE_U8 = 0,
    BRIGADE_VALUE_I8 = 1,
    BRIGADE_VALUE_U16 = 2,
    BRIGADE_VALUE_I16 = 3,
    BRIGADE_VALUE_U32 = 4,
    BRIGADE_VALUE_I32 = 5,
    BRIGADE_VALUE_F32 = 6,
    BRIGADE_VALUE_BOOL = 7,
    BRIGADE_VALUE_STRING = 8,
    BRIGADE_VALUE_ARRAY = 9,
    BRIGADE_VALUE_U64 = 10,
    BRIGADE_VALUE_I64 = 11,
    BRIGADE_VALUE_F64 = 12,
} brigade_value_type;

/* A string from the file: len bytes, followed by a NUL that is not part of
 * it (the bytes themselves may contain NULs). */
typedef struct brigade_string {
    const char *ptr;
    uint64_t len;
} brigade_string;

/* A decoded metadata value. Scalars are widened into u64/i64/f64/b; arrays
 * hold count elements of elem_type in native, aligned form:
 *   numeric  -> `numbers` points at count packed elements of that C type
 *   string   -> `strings`
 *   array    -> `items` (nested arrays) */
typedef struct brigade_value {
    brigade_value_type type;
    brigade_value_type elem_type; /* arrays only */
    uint64_t count;               /* arrays only */
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        brigade_string str;
        const void *numbers;
        const brigade_string *strings;
        const struct brigade_value *items;
    } as;
} brigade_value;

typedef struct brigade_tensor_info {
    const char *name;
    uint32_t type;        /* GGUF tensor type id, see brigade_type_name */
    uint32_t n_dims;      /* 1..4 */
    uint64_t ne[4];       /* elements per dimension, innermost first; unused = 1 */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint64_t offset;      /* byte offset in the file */
    const void *data;     /* mapped or loaded bytes */
} brigade_tensor_info;

typedef struct brigade_gguf brigade_gguf;

typedef struct brigade_gguf_options {
    bool no_mmap; /* read the whole file into memory instead of mapping it */
    /* Called while a --no-mmap read progresses, with done <= total bytes. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} brigade_gguf_options;

/* Opens and validates a GGUF v2/v3 file: every count, length, offset and size
 * is checked against the file; known metadata keys must have their expected
 * types. opts may be NULL (defaults: mmap). */
brigade_status brigade_gguf_open(const char *path, const brigade_gguf_options *opts,
                                 brigade_gguf **out, brigade_error *err);
/* The same over bytes already in memory (not copied: keep them alive). */
brigade_status brigade_gguf_open_memory(const void *data, size_t size, const char *label,
                                        brigade_gguf **out, brigade_error *err);
void brigade_gguf_close(brigade_gguf *file);

uint32_t brigade_gguf_version(const brigade_gguf *file);
uint64_t brigade_gguf_file_size(const brigade_gguf *file);
uint32_t brigade_gguf_alignment(const brigade_gguf *file);
uint64_t brigade_gguf_data_offset(const brigade_gguf *file);

int64_t brigade_gguf_kv_count(const brigade_gguf *file);
const char *brigade_gguf_kv_key(const brigade_gguf *file, int64_t index);
const brigade_value *brigade_gguf_kv_value(const brigade_gguf *file, int64_t index);
/* The value of key, or NULL if absent. */
const brigade_value *brigade_gguf_get(const brigade_gguf *file, const char *key);

/* Typed getters for callers that need one value: an absent key leaves *out
 * as it is and returns OK unless required; a value of another kind (a string
 * where a number is expected, a negative or too large integer) is an error
 * naming the key. Integers of any width are accepted when they fit. */
brigade_status brigade_gguf_get_u32(const brigade_gguf *file, const char *key, bool required,
                                    uint32_t *out, brigade_error *err);
brigade_status brigade_gguf_get_f32(const brigade_gguf *file, const char *key, bool required,
                                    float *out, brigade_error *err);
brigade_status brigade_gguf_get_str(const brigade_gguf *file, const char *key, bool required,
                                    brigade_string *out, brigade_error *err);

int64_t brigade_gguf_tensor_count(const brigade_gguf *file);
const brigade_tensor_info *brigade_gguf_tensor(const brigade_gguf *file, int64_t index);
/* The tensor called name, or NULL. */
const brigade_tensor_info *brigade_gguf_find_tensor(const brigade_gguf *file, const char *name);

/* "q4_K", "f32", ...; NULL for an unknown id. */
const char *brigade_type_name(uint32_t type);
/* Bits per weight of a tensor type (e.g. 4.5 for q4_K); 0 if unknown. */
double brigade_type_bits(uint32_t type);
const char *brigade_value_type_name(brigade_value_type type);
/* Bytes of one element of a numeric or bool type; 0 for strings and arrays. */
unsigned brigade_value_type_size(brigade_value_type type);

/* ------------------------------------------------------------------ models */

/* A loaded model: hyperparameters read and checked, every tensor bound by
 * name and checked for shape and type. Read-only once loaded. */
typedef struct brigade_model brigade_model;

typedef struct brigade_model_options {
    bool no_mmap; /* read the weights into memory instead of mapping the file */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} brigade_model_options;

/* Supported architectures: qwen35moe, qwen3moe. opts may be NULL. */
brigade_status brigade_model_load(const char *path, const brigade_model_options *opts,
                                  brigade_model **out, brigade_error *err);
void brigade_model_free(brigade_model *model);

/* The file the model was loaded from (metadata, tokenizer, tensors). */
const brigade_gguf *brigade_model_file(const brigade_model *model);
const char *brigade_model_arch(const brigade_model *model);
uint32_t brigade_model_n_layers(const brigade_model *model);
uint32_t brigade_model_n_vocab(const brigade_model *model);
uint64_t brigade_model_n_params(const brigade_model *model);
uint64_t brigade_model_weight_bytes(const brigade_model *model);

/* The weights' bytes by part of the model; they sum to the weight bytes. */
typedef struct brigade_weight_breakdown {
    uint64_t attention;      /* full-attention layers: q, k, v, output, q/k norms */
    uint64_t deltanet;       /* DeltaNet layers: projections, convolution, gates, norm */
    uint64_t routed_experts; /* gate/up/down of every routed expert */
    uint64_t shared_experts; /* the shared expert and its gate */
    uint64_t router;         /* expert scores (ffn_gate_inp) */
    uint64_t norms;          /* per-layer and output norms */
    uint64_t token_embd, output;
    uint32_t n_attention_layers, n_deltanet_layers;
} brigade_weight_breakdown;
void brigade_model_weights(const brigade_model *model, brigade_weight_breakdown *out);

/* ---------------------------------------------------------------- sessions */

/* A session evaluates token sequences against a model: it owns the KV
 * cache of the attention layers, the recurrent state of the DeltaNet layers
 * and the scratch buffers, all allocated when it is created. It holds
 * n_seq_max sequences (one by default), each with its own n_ctx positions
 * and state; brigade_session_eval works on sequence 0, and
 * brigade_session_eval_batch evaluates tokens of several sequences in one
 * forward pass. One thread at a time. */
typedef struct brigade_session brigade_session;

/* Element types of the KV cache; f16 is the default, as in llama.cpp. */
typedef enum brigade_cache_type {
    BRIGADE_CACHE_F16 = 0,
    BRIGADE_CACHE_F32,
    BRIGADE_CACHE_Q8_0,
    BRIGADE_CACHE_Q4_0,
} brigade_cache_type;

typedef struct brigade_session_options {
    uint32_t n_ctx;     /* context length; 0: min(model's training context, 4096) */
    uint32_t n_threads; /* 0: every online core */
    uint32_t n_ubatch;  /* tokens evaluated together in prefill (-ub); 0: 512 */
    brigade_cache_type cache_type_k, cache_type_v; /* llama.cpp's -ctk/-ctv */
    uint32_t n_seq_max; /* sequences held at once; 0: 1. KV cache and recurrent
                         * state are allocated for each */
    /* GPU offload (a build with `make CUDA=1`; any other build refuses a
     * request for GPU layers with "built without CUDA"). The backend is
     * chosen once, when the session is created. */
    int32_t n_gpu_layers; /* -ngl: the last N layers and the output head on the GPU;
                           * 0: CPU only; BRIGADE_NGL_AUTO: the planner's choice for
                           * gpu_budget (the card's free memory minus a margin) */
    uint32_t n_cpu_moe;   /* --n-cpu-moe: routed experts of the first N layers stay in
                           * host memory and run on the CPU */
    uint64_t gpu_budget;  /* --gpu-budget: plan as if the card had this many bytes
                           * free; 0: its real free memory */
} brigade_session_options;

#define BRIGADE_NGL_AUTO (-1)

/* A memory size as flags take it: "24G", "24GiB", "16384M", "1.5g",
 * "512MiB", "1T" or plain bytes ("4096"); K, M, G, T are binary (KiB ...
 * TiB), optionally followed by "iB" or "B". false for anything else,
 * negative or overflowing. */
bool brigade_parse_size(const char *text, uint64_t *out);

/* Whether this build has a GPU backend (make CUDA=1). */
bool brigade_gpu_built(void);

/* What a session put on the GPU, and what the card's memory says about it. */
typedef struct brigade_gpu_report {
    bool active;            /* false: the session runs on the CPU only */
    char device[128];       /* e.g. "NVIDIA H200 (sm_90, 139.8 GiB)" */
    uint32_t n_gpu_layers, n_cpu_moe_layers;
    uint32_t n_tensors;     /* weight tensors uploaded */
    uint64_t weights_bytes, state_bytes, scratch_bytes; /* the device arena, by part */
    uint64_t arena_bytes;   /* their sum, as allocated */
    uint64_t planned_bytes; /* brigade_memory_place's GPU figure for this split, with
                             * the runtime overhead the planner assumes: */
    uint64_t overhead_bytes; /* BRIGADE_GPU_OVERHEAD_DEFAULT */
    uint64_t measured_bytes; /* free memory once the runtime had started minus free
                              * memory after the upload (cudaMemGetInfo): the arena as
                              * the card counts it */
    uint64_t runtime_bytes;  /* total minus free once the runtime had started: its
                              * context (and anything else on the card) */
    uint64_t free_before, total; /* the card */
    uint32_t decode_kernels; /* kernels in the graph a one-token decode step replays (its
                              * layers after any with experts on the CPU); 0 until one ran */
} brigade_gpu_report;
void brigade_session_gpu(const brigade_session *session, brigade_gpu_report *out);

/* Memory, in bytes, of a model with a session's settings. */
typedef struct brigade_memory {
    uint64_t weights_bytes;   /* the tensors the model uses */
    uint64_t kv_bytes;        /* K and V caches of the attention layers */
    uint64_t recurrent_bytes; /* DeltaNet convolution and state */
    uint64_t compute_bytes;   /* micro-batch scratch */
    uint64_t total_bytes;
    uint64_t allocated_bytes; /* brigade_session_memory: what the session allocated */
    uint32_t n_ctx;
} brigade_memory;

/* What a session with these options will allocate, without allocating:
 * a pure function of the model's metadata and tensor directory. */
brigade_status brigade_memory_plan(const brigade_model *model, const brigade_session_options *opts,
                                   brigade_memory *out, brigade_error *err);
/* The plan a session was built from, with the bytes it really allocated. */
void brigade_session_memory(const brigade_session *session, brigade_memory *out);

/* Where a model goes on a GPU with gpu_budget bytes, fastest first: all on
 * the GPU (token embeddings stay in host memory, as in llama.cpp); else the
 * routed experts of as few layers as needed on the CPU (--n-cpu-moe); else
 * all experts and the first layers on the CPU (-ngl); else nothing fits.
 * overhead_bytes: the GPU runtime's own memory (context, workspaces);
 * BRIGADE_GPU_OVERHEAD_DEFAULT until it is calibrated on real GPUs. */
#define BRIGADE_GPU_OVERHEAD_DEFAULT (512ull << 20)

typedef enum brigade_placement_kind {
    BRIGADE_PLACE_ALL_GPU,
    BRIGADE_PLACE_EXPERTS_CPU,
    BRIGADE_PLACE_LAYERS_CPU,
    BRIGADE_PLACE_NONE,
} brigade_placement_kind;

typedef struct brigade_placement {
    brigade_placement_kind kind;
    uint32_t n_cpu_moe_layers; /* layers whose routed experts stay on the CPU */
    uint32_t n_gpu_layers;     /* layers on the GPU */
    uint64_t gpu_bytes, host_bytes;
} brigade_placement;

brigade_status brigade_memory_place(const brigade_model *model, const brigade_session_options *opts,
                                    uint64_t gpu_budget, uint64_t overhead_bytes,
                                    brigade_placement *out, brigade_error *err);

/* "f16", "f32", "q8_0", "q4_0" (any case); false if unknown. */
bool brigade_cache_type_from_name(const char *name, brigade_cache_type *out);
const char *brigade_cache_type_name(brigade_cache_type type);

brigade_status brigade_session_new(const brigade_model *model, const brigade_session_options *opts,
                                   brigade_session **out, brigade_error *err);
void brigade_session_free(brigade_session *session);
/* Forgets every sequence: next evaluation starts at position 0. */
void brigade_session_reset(brigade_session *session);
/* Positions of each sequence. */
uint32_t brigade_session_n_ctx(const brigade_session *session);
/* Tokens of sequence 0 evaluated so far. */
uint32_t brigade_session_n_past(const brigade_session *session);

/* A buffer for n_rows rows of logits that the session's device writes at
 * full speed (page-locked host memory when the session runs on a GPU,
 * where a decode step's copy of its logits from pageable memory would take
 * a large share of the step; plain memory otherwise). NULL when out of
 * memory. Any logits buffer works; this one is fastest. Freed by
 * brigade_logits_free, before or after the session. */
float *brigade_logits_alloc(brigade_session *session, uint32_t n_rows);
void brigade_logits_free(float *logits);

/* Appends n tokens to the sequence and evaluates them. logits receives
 * n x n_vocab floats (all_logits) or n_vocab for the last token; may be NULL.
 * Fails without changing the session if the tokens would overflow the
 * context or an id is outside the vocabulary; a NaN or Inf appearing in the
 * computation is reported with the layer where it first appeared. */
brigade_status brigade_session_eval(brigade_session *session, const int32_t *tokens, size_t n,
                                    bool all_logits, float *logits, brigade_error *err);

/* Several sequences. A token's arithmetic does not depend on the other
 * tokens of its batch, so a sequence evaluated in a batch gives the logits
 * it gives evaluated alone. */
uint32_t brigade_session_n_seq(const brigade_session *session);
/* Tokens sequence seq holds (0 for a sequence outside the session). */
uint32_t brigade_session_seq_n_past(const brigade_session *session, uint32_t seq);
/* Forgets one sequence. */
void brigade_session_seq_clear(brigade_session *session, uint32_t seq);

/* n tokens, token i appended to sequence seq[i] at its next position (the
 * tokens of one sequence in order, anywhere in the batch). logits NULL or a
 * token's flag false: no logits for it. */
typedef struct brigade_batch {
    const int32_t *tokens;  /* [n] */
    const uint32_t *seq;    /* [n] each < n_seq_max */
    const bool *logits;     /* [n] or NULL */
    size_t n;
} brigade_batch;

/* Evaluates a batch in micro-batches of n_ubatch tokens; logits receives
 * one row of n_vocab floats per flagged token, in batch order. Fails
 * without changing the session when a token is outside the vocabulary, a
 * sequence outside the session or a sequence's tokens overflow its
 * context. */
brigade_status brigade_session_eval_batch(brigade_session *session, const brigade_batch *batch,
                                          float *logits, brigade_error *err);

/* Keeps the first n tokens of sequence seq. The attention KV cache can be
 * cut anywhere, the DeltaNet recurrent state cannot: a model with recurrent
 * layers accepts only n = 0 or n = the tokens held (use a checkpoint to go
 * back further). */
brigade_status brigade_session_seq_truncate(brigade_session *session, uint32_t seq, uint32_t n,
                                            brigade_error *err);

/* Checkpoints: a copy of one sequence's recurrent state (every DeltaNet
 * layer's convolution and state), 0 bytes for a model without recurrent
 * layers. Saving one after the sequence's first n tokens and restoring it
 * later with n rolls the sequence back to those n tokens: the KV cache's
 * first n positions are still right as long as the sequence was only
 * extended or cut back to no fewer than n tokens in between. */
uint64_t brigade_session_checkpoint_bytes(const brigade_session *session);
brigade_status brigade_session_seq_save(brigade_session *session, uint32_t seq, void *buf,
                                        uint64_t size, brigade_error *err);
/* n_past: the tokens the sequence held when buf was saved (no more than it
 * holds now). */
brigade_status brigade_session_seq_restore(brigade_session *session, uint32_t seq,
                                           const void *buf, uint64_t size, uint32_t n_past,
                                           brigade_error *err);

/* ---------------------------------------------------------------- sampling */

/* Choosing the next token from a row of logits, as llama.cpp's default chain
 * does: penalties -> top-k -> top-p -> min-p -> temperature -> a random draw
 * from what is left. Names, meanings and defaults are llama.cpp's
 * (brigade_sampling_defaults). The draws come from brigade's own generator:
 * the same seed gives the same tokens, though not llama.cpp's. */
typedef struct brigade_sampling_options {
    float temp;              /* 0.8; <= 0: greedy, the most likely token after penalties */
    int32_t top_k;           /* 40; keep the k most likely tokens; 0: off */
    float top_p;             /* 0.95; keep the most likely tokens until their probabilities
                              * add up to at least top_p; in (0, 1], 1: off */
    float min_p;             /* 0.05; drop tokens less likely than min_p times the most
                              * likely one; in [0, 1], 0: off */
    int32_t min_keep;        /* 0; top-p and min-p keep at least this many tokens */
    float repeat_penalty;    /* 1.0 (off); > 0: a recent token's logit is divided by it
                              * when positive, multiplied by it when not */
    float presence_penalty;  /* 0; subtracted once from a recent token's logit */
    float frequency_penalty; /* 0; subtracted per occurrence in the recent tokens */
    int32_t penalty_last_n;  /* 64; how many accepted tokens count as recent; 0: off */
    uint64_t seed;           /* 0; the random draws' seed */
} brigade_sampling_options;

/* llama.cpp's defaults, listed above. */
brigade_sampling_options brigade_sampling_defaults(void);

/* A sampler holds its options, the recent tokens for the penalties, the
 * random generator and candidate buffers for the whole vocabulary, all
 * allocated when it is made: sampling allocates nothing. One thread at a
 * time. */
typedef struct brigade_sampler brigade_sampler;

/* opts NULL: the defaults. Options outside their ranges (above), NaN or
 * infinite, are refused with BRIGADE_ERR_ARG naming the option. */
brigade_status brigade_sampler_new(const brigade_sampling_options *opts, int32_t n_vocab,
                                   brigade_sampler **out, brigade_error *err);
void brigade_sampler_free(brigade_sampler *s);
/* Records a token of the sequence for the penalties: the prompt's tokens
 * and each token generated (sampling does not record what it chose). */
brigade_status brigade_sampler_accept(brigade_sampler *s, int32_t token, brigade_error *err);
/* Chooses a token from n_vocab logits, which are not modified. Fails on a
 * NaN or +inf logit, or when every logit is -inf. */
brigade_status brigade_sampler_sample(brigade_sampler *s, const float *logits,
                                      int32_t *token_out, brigade_error *err);
/* Forgets the recent tokens and restarts the random draws from the seed. */
void brigade_sampler_reset(brigade_sampler *s);

/* ------------------------------------------------------ quantization mixes */

/* File types (general.file_type), numbered as llama.cpp numbers them: the
 * default tensor type plus the per-tensor rules of llama.cpp's quantizer
 * (e.g. Q4_K_M keeps the output in Q6_K and gives Q6_K to half of the
 * ffn_down and attn_v/attn_qkv tensors). */
typedef enum brigade_ftype {
    BRIGADE_FTYPE_F32 = 0,
    BRIGADE_FTYPE_F16 = 1,
    BRIGADE_FTYPE_Q4_0 = 2,
    BRIGADE_FTYPE_Q4_1 = 3,
    BRIGADE_FTYPE_Q8_0 = 7,
    BRIGADE_FTYPE_Q5_0 = 8,
    BRIGADE_FTYPE_Q5_1 = 9,
    BRIGADE_FTYPE_Q2_K = 10,
    BRIGADE_FTYPE_Q3_K_S = 11,
    BRIGADE_FTYPE_Q3_K_M = 12,
    BRIGADE_FTYPE_Q3_K_L = 13,
    BRIGADE_FTYPE_Q4_K_S = 14,
    BRIGADE_FTYPE_Q4_K_M = 15,
    BRIGADE_FTYPE_Q5_K_S = 16,
    BRIGADE_FTYPE_Q5_K_M = 17,
    BRIGADE_FTYPE_Q6_K = 18,
    BRIGADE_FTYPE_BF16 = 32,
} brigade_ftype;

/* "Q4_K_M", "BF16", ...; NULL for a value brigade does not write. */
const char *brigade_ftype_name(brigade_ftype ftype);
/* Case-insensitive; false if unknown. */
bool brigade_ftype_from_name(const char *name, brigade_ftype *out);
/* The type most tensors get (Q4_K for Q4_K_M); GGUF type id. */
uint32_t brigade_ftype_default_type(brigade_ftype ftype);

/* Quantizing a GGUF file: each tensor gets the type llama.cpp's quantizer
 * gives it for the file type, with bytes identical to llama.cpp's (no
 * importance matrix). Streams tensor by tensor from the mapped input, so
 * memory stays small whatever the model's size; writes OUT.partial and
 * renames it to OUT only when complete. */
typedef struct brigade_quantize_progress {
    int64_t tensor, n_tensors; /* the tensor being written, 0-based */
    const char *name;
    uint32_t from_type, to_type;
    uint64_t bytes_done, bytes_total; /* input tensor bytes */
} brigade_quantize_progress;

typedef struct brigade_quantize_options {
    brigade_ftype ftype;
    unsigned n_threads;       /* 0: every online core */
    bool pure;                /* every quantizable tensor in the default type */
    bool allow_requantize;    /* accept quantized input tensors (loses quality) */
    int32_t output_type;      /* GGUF type for output.weight; -1: the mix's */
    int32_t token_embd_type;  /* GGUF type for token_embd.weight; -1: the mix's */
    /* Called before each tensor and as rows complete; returning false stops
     * the run (BRIGADE_ERR_CANCELLED) and leaves no output file. */
    bool (*progress)(void *user, const brigade_quantize_progress *p);
    void *progress_user;
} brigade_quantize_options;

typedef struct brigade_quantize_report {
    uint64_t n_params;
    uint64_t bytes_in, bytes_out; /* tensor data */
    int64_t n_tensors, n_quantized, n_requantized;
    uint32_t n_fallback; /* tensors whose rows forced another type */
} brigade_quantize_report;

brigade_status brigade_quantize(const char *in_path, const char *out_path,
                                const brigade_quantize_options *opts,
                                brigade_quantize_report *report, brigade_error *err);

/* ---------------------------------------------------------------- catalogue */

/* Real models known by geometry, to plan memory before downloading them. */
typedef struct brigade_catalogue_entry {
    const char *name;         /* "qwen3.6-35b-a3b" */
    const char *display_name; /* "Qwen3.6-35B-A3B" */
} brigade_catalogue_entry;

const brigade_catalogue_entry *brigade_catalogue(size_t *n);
/* The file types listed for every entry (Q4_0 ... BF16). */
const brigade_ftype *brigade_catalogue_quants(size_t *n);
/* The entry and file type a "NAME:QUANT" spec names (any case); NULL if
 * it names none. */
const brigade_catalogue_entry *brigade_catalogue_find(const char *spec, brigade_ftype *ftype);
/* "qwen3.6-35b-a3b:Q4_K_M": the model as llama.cpp's quantizer writes that
 * file type from the BF16 original (tensor types and sizes exact; the
 * tokenizer metadata is a stand-in). It has no weights: brigade_memory_plan
 * and brigade_memory_place work on it, brigade_session_new refuses it. */
brigade_status brigade_catalogue_model(const char *spec, brigade_model **out, brigade_error *err);

/* --------------------------------------------------------- synthetic models */

typedef struct brigade_synth_options {
    const char *preset;     /* "qwen3.6-35b-a3b", "qwen3-30b-a3b", "tiny-qwen35moe", "tiny-qwen3moe" */
    uint32_t n_layers;      /* 0: the preset's own count */
    uint32_t type;          /* tensor type of weight matrices (GGUF id); norms stay f32 */
    const char *vocab_path; /* GGUF whose tokenizer is copied; NULL: a built-in byte vocabulary */
    uint64_t seed;
    uint32_t n_experts_used; /* 0: the preset's own top-k */
    bool sparse;             /* leave tensor data as a hole: right header and size, no disk */
    /* Fast weights: each large matrix is assembled from blocks picked at
     * random from a pool of about a million values drawn and quantized as
     * usual (valid blocks, sane scales, the same distribution), instead of
     * drawing and quantizing every value. Reproducible for a seed, but not
     * the bytes the slow path writes. */
    bool fast;
    /* With mix set, type is ignored and each tensor gets the type llama.cpp's
     * quantizer gives it for ftype, starting from a BF16 original (matrices
     * BF16, everything else f32, as the converter writes them). */
    bool mix;
    brigade_ftype ftype;
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} brigade_synth_options;

/* Names of the presets, NULL-terminated. */
const char *const *brigade_synth_presets(void);
/* Writes a model with random weights and the preset's exact geometry. */
brigade_status brigade_synth(const char *out_path, const brigade_synth_options *opts,
                             brigade_error *err);

/* ---------------------------------------------------------------- tokenizer */
/* (section owned by the tokenizer module: src/tokenizer*.c) */

/* A byte-level BPE vocabulary (tokenizer.ggml.model "gpt2"): tokens, merges,
 * special tokens and the pre-tokenizer named by tokenizer.ggml.pre (qwen35,
 * qwen2, llama-bpe, gpt-2). Tokenizing gives the ids llama.cpp gives, for
 * any bytes. Read-only once loaded: use it from any number of threads. */
typedef struct brigade_vocab brigade_vocab;

/* Kinds of token, numbered as tokenizer.ggml.token_type, after the
 * overrides llama.cpp makes by text (e.g. "<|im_end|>" is always CONTROL). */
typedef enum brigade_token_kind {
    BRIGADE_TOKEN_UNDEFINED = 0,
    BRIGADE_TOKEN_NORMAL = 1,
    BRIGADE_TOKEN_UNKNOWN = 2,
    BRIGADE_TOKEN_CONTROL = 3,      /* found in text only with parse_special */
    BRIGADE_TOKEN_USER_DEFINED = 4, /* always found in text */
    BRIGADE_TOKEN_UNUSED = 5,
    BRIGADE_TOKEN_BYTE = 6,
} brigade_token_kind;

typedef struct brigade_special_tokens {
    int32_t bos, eos, eot, pad, unk; /* -1: none. eot, when the file names
                                        none, is found by text as llama.cpp
                                        does ("<|im_end|>", "<|eot_id|>"...) */
    bool add_bos, add_eos;           /* what tokenizing with add_special adds */
} brigade_special_tokens;

/* Reads and validates the tokenizer.* metadata of an open file (which may
 * be closed afterwards). A file without a tokenizer, another tokenizer
 * model or an unknown pre-tokenizer is an error naming what it found. */
brigade_status brigade_vocab_load(const brigade_gguf *file, brigade_vocab **out,
                                  brigade_error *err);
void brigade_vocab_free(brigade_vocab *vocab);

int32_t brigade_vocab_n_tokens(const brigade_vocab *vocab);
brigade_special_tokens brigade_vocab_specials(const brigade_vocab *vocab);
/* The pre-tokenizer's name, as tokenizer.ggml.pre spells it. */
const char *brigade_vocab_pre(const brigade_vocab *vocab);
brigade_token_kind brigade_vocab_token_kind(const brigade_vocab *vocab, int32_t id);
/* A token's text as stored (GPT-2 byte encoding: "\xc4\xa0the" for " the");
 * empty for an id outside the vocabulary. */
brigade_string brigade_vocab_token_text(const brigade_vocab *vocab, int32_t id);
/* The token whose stored text is exactly text[0..len), or -1. */
int32_t brigade_vocab_find(const brigade_vocab *vocab, const char *text, size_t len);
/* Whether a token ends generation (eos, eot and llama.cpp's list by text). */
bool brigade_vocab_is_eog(const brigade_vocab *vocab, int32_t id);

/* Tokenizes len bytes of text (any bytes: malformed UTF-8 is handled as
 * llama.cpp handles it). add_special: add BOS/EOS where the vocabulary asks
 * for them. parse_special: control tokens written in the text ("<|im_end|>")
 * become their ids; without it they are tokenized as plain text.
 * User-defined tokens are always recognised. *n is the full count even when
 * it exceeds cap (then only the first cap ids are written: call again with
 * room for *n); ids may be NULL when cap is 0. */
brigade_status brigade_tokenize(const brigade_vocab *vocab, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *ids, size_t cap,
                                size_t *n, brigade_error *err);

/* The bytes a token stands for (not NUL-terminated; they live as long as
 * the vocabulary). Control and unknown tokens render as their text only
 * when special is set, otherwise as nothing; user-defined tokens always do.
 * A piece may hold part of a UTF-8 character. Empty for an id outside the
 * vocabulary. */
brigade_string brigade_token_piece(const brigade_vocab *vocab, int32_t id, bool special);

/* Turns a stream of tokens into text that never ends inside a character:
 * bytes are given out as soon as they complete UTF-8 characters, and the
 * start of a character is held until the tokens that finish it arrive.
 * Bytes that cannot become a character are given out as they are. */
typedef struct brigade_detok brigade_detok;

brigade_status brigade_detok_create(const brigade_vocab *vocab, bool special,
                                    brigade_detok **out, brigade_error *err);
/* Adds one token. *text, *len: the bytes now ready (possibly none), valid
 * until the next call on d. An id outside the vocabulary is an error. */
brigade_status brigade_detok_push(brigade_detok *d, int32_t id, const char **text, size_t *len,
                                  brigade_error *err);
/* At the end of the stream: the bytes still held (an unfinished character),
 * and back to an empty state. */
void brigade_detok_flush(brigade_detok *d, const char **text, size_t *len);
/* Drops anything held, for a new stream. */
void brigade_detok_reset(brigade_detok *d);
void brigade_detok_free(brigade_detok *d);

/* ----------------------------------------------------------- chat templates */
/* (section owned by the chat module: src/chat*.c)
 *
 * A model's tokenizer.chat_template is never executed. brigade recognizes
 * which family it belongs to and renders conversations with its own code for
 * that family, byte for byte what the template gives under Hugging Face
 * transformers (jinja2):
 *   qwen3    Qwen3 (ChatML, <think> blocks, enable_thinking, JSON tool calls
 *            in <tool_call>{"name": ..., "arguments": ...}</tool_call>)
 *   qwen3.5  Qwen3.5 / Qwen3.6 (the template opens <think> itself, XML tool
 *            calls <tool_call><function=NAME><parameter=P>...)
 *   chatml   plain <|im_start|>role\ncontent<|im_end|>: the fallback for an
 *            unknown or missing template, with a warning; no tools.
 * Recognition: a template whose text (trailing whitespace aside) hashes to a
 * known official one is used without a warning; otherwise the markers of a
 * family (see brigade_chat_template_from_string) select it with a warning
 * that the text differs; anything else is ChatML with a warning.
 * A template is read-only once made: several threads may render with it and
 * create parsers from it at once (each parser belongs to one thread). */

typedef enum brigade_chat_family {
    BRIGADE_CHAT_CHATML = 0,
    BRIGADE_CHAT_QWEN3,
    BRIGADE_CHAT_QWEN35, /* Qwen3.5 and Qwen3.6 */
} brigade_chat_family;

/* A tool call made by the assistant. */
typedef struct brigade_chat_tool_call {
    const char *id;        /* optional; the Qwen templates do not render it */
    const char *name;
    /* JSON text of the arguments, normally an object; NULL: none. Text that
     * is valid JSON is rendered as that value (qwen3: `tojson`; qwen3.5: one
     * <parameter> per key, which requires an object); other text is pasted
     * as it is by qwen3 (the template's string case) and refused by
     * qwen3.5. This is what llama.cpp does with OpenAI's string arguments. */
    const char *arguments;
} brigade_chat_tool_call;

typedef struct brigade_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool" */
    const char *content; /* NULL: none (renders as "") */
    /* assistant: the thinking that came before content; NULL: none given,
     * in which case the templates take it from <think>...</think> at the
     * start of content. Templates drop it for turns before the last user
     * query. */
    const char *reasoning_content;
    const brigade_chat_tool_call *tool_calls; /* assistant */
    size_t n_tool_calls;
    const char *tool_call_id; /* tool: the call answered (not rendered by Qwen templates) */
    const char *name;         /* tool: the function's name (idem) */
} brigade_chat_message;

typedef struct brigade_chat_options {
    bool add_generation_prompt; /* end with the opening of an assistant turn */
    bool disable_thinking;      /* the templates' enable_thinking=false */
    /* JSON array of tool definitions, OpenAI style ({"type": "function",
     * "function": {"name", "description", "parameters": <JSON schema>}});
     * NULL or "[]": none. */
    const char *tools;
} brigade_chat_options;

typedef struct brigade_chat_template brigade_chat_template;

/* From the model's tokenizer.chat_template; a file without one gets ChatML
 * with a warning. */
brigade_status brigade_chat_template_from_gguf(const brigade_gguf *file,
                                               brigade_chat_template **out,
                                               brigade_error *err);
/* From template text (len bytes; NULL text: no template). Markers when the
 * hash is not a known one: qwen3.5 needs "<|im_start|>", "<think>",
 * "enable_thinking", "reasoning_content", "<tool_call>", "<function=" and
 * "<parameter="; qwen3 the same without "<function=" (JSON tool calls).
 * So Qwen3-Coder (no thinking), QwQ and Qwen2.5 (no reasoning_content)
 * fall back to ChatML. */
brigade_status brigade_chat_template_from_string(const char *text, size_t len,
                                                 brigade_chat_template **out,
                                                 brigade_error *err);
void brigade_chat_template_free(brigade_chat_template *tmpl);
brigade_chat_family brigade_chat_template_family(const brigade_chat_template *tmpl);
/* NULL when the template is known exactly; otherwise why the prompt may not
 * be exactly what the model was trained on. Lives as long as tmpl. */
const char *brigade_chat_template_warning(const brigade_chat_template *tmpl);
/* "chatml", "qwen3", "qwen3.5". */
const char *brigade_chat_family_name(brigade_chat_family family);

typedef struct brigade_chat_prompt {
    char *text;          /* NUL-terminated; release with brigade_chat_prompt_free */
    size_t len;          /* bytes before the NUL (text may hold NULs from JSON) */
    const char *warning; /* the template's warning, or NULL */
} brigade_chat_prompt;

/* Renders a conversation. Fails (BRIGADE_ERR_ARG, with the template's own
 * words) where the template raises: e.g. qwen3.5 with a system message after
 * the first, with no user query, or with an unknown role; and with tools on
 * the ChatML fallback (BRIGADE_ERR_UNSUPPORTED). opts may be NULL. */
brigade_status brigade_chat_render(const brigade_chat_template *tmpl,
                                   const brigade_chat_message *messages, size_t n_messages,
                                   const brigade_chat_options *opts, brigade_chat_prompt *out,
                                   brigade_error *err);
void brigade_chat_prompt_free(brigade_chat_prompt *prompt);

/* Streaming parser of what the model generates after a rendered prompt:
 * splits reasoning (<think>...</think>, also when the prompt itself opened
 * the block) from content and extracts tool calls, from chunks of any size
 * (down to single bytes that split tags and UTF-8 characters). Text is
 * released only once it cannot be part of a tag, and never splits a UTF-8
 * character. Reasoning and content are trimmed of surrounding whitespace
 * (as the templates do when the message is rendered again). Tool calls are
 * recognized only when options give tools (as llama.cpp does). Arguments
 * come back as JSON text of an object: qwen3 keeps the model's own JSON
 * text; qwen3.5 builds {"param":value,...} where a value is JSON when the
 * parameter's schema allows a non-string type and the text parses as one
 * (the template's own True / False / None spellings included; a parameter
 * without a schema type: any non-string JSON), else the text as a string,
 * minus the newline after <parameter=...> and before </parameter>.
 * Malformed markup is kept as content; it is never an error. */
typedef struct brigade_chat_parser brigade_chat_parser;

typedef struct brigade_chat_delta {
    const char *reasoning; /* new reasoning text (not NUL-terminated) */
    size_t reasoning_len;
    const char *content;   /* new content text (not NUL-terminated) */
    size_t content_len;
    const brigade_chat_tool_call *tool_calls; /* calls completed by this step */
    size_t n_tool_calls;
} brigade_chat_delta;

/* opts: the ones the prompt was rendered with (add_generation_prompt and
 * disable_thinking tell whether the output starts inside <think>; tools
 * enable tool calls and give parameter types). */
brigade_status brigade_chat_parser_new(const brigade_chat_template *tmpl,
                                       const brigade_chat_options *opts,
                                       brigade_chat_parser **out, brigade_error *err);
/* delta (may be NULL) points into the parser: valid until its next call. */
brigade_status brigade_chat_parser_feed(brigade_chat_parser *parser, const char *text,
                                        size_t len, brigade_chat_delta *delta,
                                        brigade_error *err);
/* End of output: releases what was held back (an unclosed tool call that
 * parses is still a call). Feeding after finish is an error. */
brigade_status brigade_chat_parser_finish(brigade_chat_parser *parser,
                                          brigade_chat_delta *delta, brigade_error *err);
/* Everything parsed so far as one assistant message (reasoning_content NULL
 * if there was no thinking block; tool call ids NULL), ready to be rendered
 * again. Valid until the parser's next call. */
const brigade_chat_message *brigade_chat_parser_message(const brigade_chat_parser *parser);
void brigade_chat_parser_free(brigade_chat_parser *parser);

/* ------------------------------------------- perplexity and KL divergence */
/* (section owned by the perplexity module: src/perplexity.c)
 *
 * The arithmetic of llama-perplexity. A text is cut into windows of n_ctx
 * tokens, each evaluated from an empty context; the logits at positions
 * n_ctx/2 .. n_ctx-2 are scored against the token that follows (the first
 * half is context only). Against a base model, each scored position adds
 * the KL divergence of the two next-token distributions. The base is kept
 * in llama.cpp's own log-probability file (llama-perplexity
 * --kl-divergence-base), so either program reads what the other wrote. */

/* Scored positions of a window: n_ctx - 1 - n_ctx/2 (0 below n_ctx 3). */
uint32_t brigade_ppl_n_scored(uint32_t n_ctx);

/* Evaluates one window from an empty context (the session is reset):
 * tokens[0 .. n_ctx-1), the first replaced by bos when bos >= 0 (what
 * llama-perplexity does for vocabularies that add a BOS), in calls of at
 * most n_batch tokens (0: no limit) that never mix context and scored
 * positions. logits receives brigade_ppl_n_scored(n_ctx) rows of n_vocab
 * (the session's model's): positions n_ctx/2 .. n_ctx-2, whose next tokens
 * are tokens[n_ctx/2 + 1 ..]. The session's context must hold n_ctx - 1
 * tokens (the last one is never evaluated: nothing follows it). */
brigade_status brigade_ppl_eval_window(brigade_session *session, int32_t n_vocab,
                                       const int32_t *tokens, uint32_t n_ctx, int32_t bos,
                                       uint32_t n_batch, float *logits, brigade_error *err);

/* A row's log-softmax: log p(i) = logits[i] - max - log_sum_exp. */
typedef struct brigade_log_softmax {
    float max;          /* the largest logit */
    double log_sum_exp; /* log sum_i exp(logits[i] - max) */
    int32_t argmax;     /* the first index holding max */
} brigade_log_softmax;

void brigade_log_softmax_of(const float *logits, int32_t n_vocab, brigade_log_softmax *out);

/* A mean and its standard error. */
typedef struct brigade_estimate {
    double value, error;
} brigade_estimate;

/* Sums of the negative log-likelihood over scored tokens. */
typedef struct brigade_ppl_stats {
    double sum_nll, sum_nll2;
    uint64_t count;
} brigade_ppl_stats;

/* Adds -log p(token) of one row and returns it. */
double brigade_ppl_add(brigade_ppl_stats *s, const float *logits, int32_t n_vocab, int32_t token);
/* exp(mean nll), with llama-perplexity's error: ppl * sqrt(var / (count-1))
 * (0 with fewer than two tokens or no spread). */
brigade_estimate brigade_ppl_estimate(const brigade_ppl_stats *s);

/* A base row packs the log-probabilities of one position in uint16 words:
 * two floats (scale, min) in the first four words, then a word w per token
 * standing for scale*w + min, padded to an even count. Log-probabilities
 * more than 16 below the largest all become min. */
size_t brigade_logprob_row_words(int32_t n_vocab);
void brigade_logprob_pack(const float *logits, int32_t n_vocab, uint16_t *row);

typedef struct brigade_kld_stats {
    double sum_nll, sum_nll2;           /* the model under test */
    double sum_nll_base, sum_nll_base2; /* the base */
    double sum_nll_nll_base;
    double sum_kld, sum_kld2;
    double sum_dp, sum_dp2, sum_dp4; /* dp = p(token) - p_base(token) */
    double max_abs_dp;
    uint64_t n_same_top, count;
} brigade_kld_stats;

/* Adds one scored position: the logits of the model under test, the base's
 * packed row for the same position (from brigade_logprob_pack or
 * brigade_logprob_read) and the token that follows. Returns the position's
 * KL divergence sum_i p_base(i) log(p_base(i) / p(i)) over the tokens the
 * row keeps; *dp (may be NULL) receives p(token) - p_base(token). */
double brigade_kld_add(brigade_kld_stats *s, const float *logits, const uint16_t *base_row,
                       int32_t n_vocab, int32_t token, double *dp);

typedef struct brigade_kld_summary {
    uint64_t count;
    brigade_estimate ppl, ppl_base;   /* exp(mean nll) of each model */
    double ln_ppl_correlation;        /* Cor(ln PPL(Q), ln PPL(base)) */
    brigade_estimate ln_ppl_ratio;    /* ln(PPL(Q) / PPL(base)) */
    brigade_estimate ppl_ratio, ppl_diff;
    brigade_estimate kld;             /* mean KL divergence */
    brigade_estimate dp, dp_rms;      /* mean and RMS of dp */
    brigade_estimate same_top;        /* fraction of positions, in [0, 1] */
} brigade_kld_summary;

/* The means and errors llama-perplexity --kl-divergence prints. */
void brigade_kld_summarize(const brigade_kld_stats *s, brigade_kld_summary *out);

/* Quantiles by linear interpolation between sorted values. */
typedef struct brigade_quantiles {
    float min, p0_1, p1, p5, p10, p25, median, p75, p90, p95, p99, p99_9, max;
} brigade_quantiles;

/* Sorts values (n may be 0: all zero) and reads their quantiles. */
void brigade_quantiles_of(float *values, size_t n, brigade_quantiles *out);

/* llama.cpp's log-probability file: "_logits_", int32 n_ctx, n_vocab and
 * n_chunk, the n_chunk * n_ctx int32 tokens evaluated, then for each chunk
 * brigade_ppl_n_scored(n_ctx) packed rows. Little-endian hosts only, as
 * llama.cpp. A file is either being written or being read. */
typedef struct brigade_logprob_file brigade_logprob_file;

/* Creates path and writes the header and tokens. */
brigade_status brigade_logprob_create(const char *path, uint32_t n_ctx, int32_t n_vocab,
                                      uint32_t n_chunk, const int32_t *tokens,
                                      brigade_logprob_file **out, brigade_error *err);
/* Packs one row of logits and appends it. */
brigade_status brigade_logprob_write(brigade_logprob_file *f, const float *logits,
                                     brigade_error *err);
/* Opens and validates a file: magic, counts, every token, the exact size
 * the header implies; errors name the file and byte offset. */
brigade_status brigade_logprob_open(const char *path, brigade_logprob_file **out,
                                    brigade_error *err);
uint32_t brigade_logprob_n_ctx(const brigade_logprob_file *f);
int32_t brigade_logprob_n_vocab(const brigade_logprob_file *f);
uint32_t brigade_logprob_n_chunk(const brigade_logprob_file *f);
/* n_chunk * n_ctx tokens (of a file being read or written). */
const int32_t *brigade_logprob_tokens(const brigade_logprob_file *f);
/* Reads the next row (brigade_logprob_row_words words), checking that its
 * scale and minimum make a row of log-probabilities. */
brigade_status brigade_logprob_read(brigade_logprob_file *f, uint16_t *row, brigade_error *err);
/* Closes f (NULL: nothing). A written file must hold every row the header
 * announced and reach the disk, or this fails. */
brigade_status brigade_logprob_close(brigade_logprob_file *f, brigade_error *err);

#ifdef __cplusplus
}
#endif

#endif
