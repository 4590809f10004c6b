/* Named geometries of real models (and tiny test versions of them). Shared
 * by `synth` and, later, the memory planner's catalogue. */
#ifndef BG_PRESETS_H
#define BG_PRESETS_H

#include "hparams.h"

typedef struct bg_preset {
    const char *name;
    const char *display_name; /* general.name of files made from it */
    bg_hparams hp;
} bg_preset;

const bg_preset *bg_preset_find(const char *name);

#endif
