/* Reader entry points beyond the public API: a file described by its header
 * alone (metadata and tensor directory, no data), as the catalogue builds
 * one to plan a model nobody has downloaded. */
#ifndef BG_GGUF_READER_H
#define BG_GGUF_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* Opens header_len bytes of header as a file of file_size bytes: offsets and
 * sizes are checked against file_size, and every tensor's data is NULL.
 * The header is not copied: keep it alive until the file is closed. */
brigade_status bg_gguf_open_header(const void *header, size_t header_len, uint64_t file_size,
                                   const char *label, brigade_gguf **out, brigade_error *err);
bool bg_gguf_is_header_only(const brigade_gguf *file);

#endif
