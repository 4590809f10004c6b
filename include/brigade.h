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

/* --------------------------------------------------------- synthetic models */

typedef struct brigade_synth_options {
    const char *preset;     /* "qwen3.6-35b-a3b", "qwen3-30b-a3b", "tiny-qwen35moe", "tiny-qwen3moe" */
    uint32_t n_layers;      /* 0: the preset's own count */
    uint32_t type;          /* tensor type of weight matrices (GGUF id); norms stay f32 */
    const char *vocab_path; /* GGUF whose tokenizer is copied; NULL: a built-in byte vocabulary */
    uint64_t seed;
    uint32_t n_experts_used; /* 0: the preset's own top-k */
    bool sparse;             /* leave tensor data as a hole: right header and size, no disk */
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

/* ----------------------------------------------------------- chat templates */
/* (section owned by the chat module: src/chat*.c) */

#ifdef __cplusplus
}
#endif

#endif
