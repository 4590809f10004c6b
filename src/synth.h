/* Synthetic models beyond the public brigade_synth: the same description
 * without writing a file, for the catalogue. */
#ifndef BG_SYNTH_H
#define BG_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* The header (metadata and tensor directory) brigade_synth would write for
 * o, in malloc'd memory, and the size the whole file would have. */
brigade_status bg_synth_header(const brigade_synth_options *o, uint8_t **header, size_t *len,
                               uint64_t *file_size, brigade_error *err);

#endif
