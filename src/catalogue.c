/* The catalogue: real models known by geometry, described exactly as
 * llama.cpp's quantizer would write them, so their memory can be planned
 * before anyone downloads 22 GB. A catalogue model is the header a
 * synthetic file of that geometry and mix would have, read as a file
 * without data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "gguf_reader.h"
#include "model.h"
#include "synth.h"

static const brigade_catalogue_entry entries[] = {
    {"qwen3.6-35b-a3b", "Qwen3.6-35B-A3B"},
    {"qwen3.5-122b-a10b", "Qwen3.5-122B-A10B"},
    {"qwen3.5-397b-a17b", "Qwen3.5-397B-A17B"},
    {"qwen3-30b-a3b", "Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", "Qwen3-235B-A22B"},
};

/* The mixes people download; any other file type brigade writes works too. */
static const brigade_ftype quants[] = {
    BRIGADE_FTYPE_Q4_0, BRIGADE_FTYPE_Q4_K_M, BRIGADE_FTYPE_Q5_K_M,
    BRIGADE_FTYPE_Q6_K, BRIGADE_FTYPE_Q8_0,   BRIGADE_FTYPE_BF16,
};

const brigade_catalogue_entry *brigade_catalogue(size_t *n)
{
    *n = sizeof entries / sizeof *entries;
    return entries;
}

const brigade_ftype *brigade_catalogue_quants(size_t *n)
{
    *n = sizeof quants / sizeof *quants;
    return quants;
}

static brigade_status unknown(const char *spec, brigade_error *err)
{
    char names[256] = "";
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 entries[i].name);
    return bg_fail(err, BRIGADE_ERR_ARG,
                   "'%s' is not in the catalogue (expected NAME:QUANT with NAME one of %s and "
                   "QUANT one of Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q8_0, BF16)",
                   spec, names);
}

const brigade_catalogue_entry *brigade_catalogue_find(const char *spec, brigade_ftype *ftype)
{
    const char *colon = strchr(spec, ':');
    if (!colon || !brigade_ftype_from_name(colon + 1, ftype))
        return NULL;
    size_t name_len = (size_t)(colon - spec);
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        if (strlen(entries[i].name) == name_len && strncasecmp(entries[i].name, spec, name_len) == 0)
            return &entries[i];
    return NULL;
}

brigade_status brigade_catalogue_model(const char *spec, brigade_model **out, brigade_error *err)
{
    *out = NULL;
    brigade_ftype ftype;
    const brigade_catalogue_entry *entry = brigade_catalogue_find(spec, &ftype);
    if (!entry)
        return unknown(spec, err);

    brigade_synth_options o = {.preset = entry->name, .seed = 1, .mix = true, .ftype = ftype};
    uint8_t *header;
    size_t len;
    uint64_t file_size;
    brigade_status st = bg_synth_header(&o, &header, &len, &file_size, err);
    if (st)
        return st;
    char label[128];
    snprintf(label, sizeof label, "%s:%s", entry->name, brigade_ftype_name(ftype));
    brigade_gguf *file;
    st = bg_gguf_open_header(header, len, file_size, label, &file, err);
    if (!st)
        st = bg_model_from_file(file, label, out, err);
    if (st) {
        free(header);
        return st;
    }
    (*out)->header = header;
    return BRIGADE_OK;
}
