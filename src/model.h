/* The loaded model as the engine sees it: hyperparameters and each layer's
 * tensors by role. */
#ifndef BG_MODEL_H
#define BG_MODEL_H

#include "arch.h"
#include "brigade.h"
#include "hparams.h"

#include <stdbool.h>

typedef struct bg_layer {
    const brigade_tensor_info *t[BG_ROLE_COUNT]; /* NULL where the layer has none */
} bg_layer;

struct brigade_model {
    brigade_gguf *file;
    bg_hparams hp;
    bg_layer global; /* token_embd, output_norm, output (output may be token_embd: tied) */
    bg_layer *layers;
    uint64_t n_params, weight_bytes;
    int64_t n_ignored; /* tensors in the file the architecture does not use (e.g. MTP) */
    void *header;      /* catalogue models: the header bytes the file is read from */
    bool header_only;  /* described by its header alone: planned, never evaluated */
};

/* Takes ownership of file (closed on failure) and binds it as a model;
 * label prefixes error messages. */
brigade_status bg_model_from_file(brigade_gguf *file, const char *label, brigade_model **out,
                                  brigade_error *err);

#endif
