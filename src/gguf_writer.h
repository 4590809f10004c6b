/* GGUF writer: collects metadata and the tensor directory, writes them, then
 * takes tensor data in order as a stream, so a file larger than memory can
 * be written piece by piece. */
#ifndef BG_GGUF_WRITER_H
#define BG_GGUF_WRITER_H

#include "brigade.h"

typedef struct bg_gguf_writer bg_gguf_writer;

/* alignment: 0 for the GGUF default (32); otherwise a power of two up to
 * 2^30, which is also recorded as general.alignment. NULL when out of memory
 * or for any other alignment. */
bg_gguf_writer *bg_gguf_writer_new(uint32_t alignment);
void bg_gguf_writer_free(bg_gguf_writer *w);

/* Metadata, kept in insertion order; setting a key again replaces its value.
 * Values are deep-copied; a failed set leaves the writer unchanged.
 * general.alignment is the writer's own (see bg_gguf_writer_new). */
brigade_status bg_gguf_set(bg_gguf_writer *w, const char *key, const brigade_value *value,
                           brigade_error *err);
brigade_status bg_gguf_set_u32(bg_gguf_writer *w, const char *key, uint32_t v, brigade_error *err);
brigade_status bg_gguf_set_f32(bg_gguf_writer *w, const char *key, float v, brigade_error *err);
brigade_status bg_gguf_set_bool(bg_gguf_writer *w, const char *key, bool v, brigade_error *err);
brigade_status bg_gguf_set_str(bg_gguf_writer *w, const char *key, const char *v,
                               brigade_error *err);
/* A numeric array of count elements of elem_type, packed natively. */
brigade_status bg_gguf_set_array(bg_gguf_writer *w, const char *key, brigade_value_type elem_type,
                                 const void *elems, uint64_t count, brigade_error *err);

/* Tensors are laid out in the order they are added. */
brigade_status bg_gguf_add_tensor(bg_gguf_writer *w, const char *name, uint32_t type,
                                  uint32_t n_dims, const uint64_t *ne, brigade_error *err);
int64_t bg_gguf_writer_tensor_count(const bg_gguf_writer *w);
/* Bytes of tensor i's data. */
uint64_t bg_gguf_writer_tensor_bytes(const bg_gguf_writer *w, int64_t i);
/* Total size the finished file will have. */
uint64_t bg_gguf_writer_file_size(const bg_gguf_writer *w);

/* The header, metadata and tensor directory as the file would begin, in
 * malloc'd memory (free it): a model described without its data. */
brigade_status bg_gguf_writer_header(const bg_gguf_writer *w, uint8_t **out, size_t *len,
                                     brigade_error *err);

/* Creates the file and writes the header, metadata and tensor directory. */
brigade_status bg_gguf_writer_begin(bg_gguf_writer *w, const char *path, brigade_error *err);
/* Appends data to the tensors in order; a tensor may arrive in any number of
 * pieces, and padding between tensors is inserted automatically. */
brigade_status bg_gguf_writer_data(bg_gguf_writer *w, const void *data, uint64_t n,
                                   brigade_error *err);
/* Like bg_gguf_writer_data, but leaves the n bytes as a hole in the file
 * (zeros that take no disk): full-size geometries for planning and tests. */
brigade_status bg_gguf_writer_skip(bg_gguf_writer *w, uint64_t n, brigade_error *err);
/* Checks every tensor got all its bytes, flushes and closes the file. */
brigade_status bg_gguf_writer_finish(bg_gguf_writer *w, brigade_error *err);

#endif
