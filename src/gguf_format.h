/* Constants of the GGUF container shared by the reader and the writer. */
#ifndef BG_GGUF_FORMAT_H
#define BG_GGUF_FORMAT_H

#include "brigade.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4u
/* ggml keeps tensor names in a 64-byte field. */
#define GGUF_MAX_NAME 63u
/* Deeper nesting than any real file uses; bounds recursion on hostile input. */
#define GGUF_MAX_ARRAY_DEPTH 8
#define GGUF_KEY_ALIGNMENT "general.alignment"

/* Bytes of one scalar element of a numeric or bool value type; 0 for
 * strings, arrays and unknown ids. */
static inline unsigned gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case BRIGADE_VALUE_U8: case BRIGADE_VALUE_I8: case BRIGADE_VALUE_BOOL: return 1;
    case BRIGADE_VALUE_U16: case BRIGADE_VALUE_I16: return 2;
    case BRIGADE_VALUE_U32: case BRIGADE_VALUE_I32: case BRIGADE_VALUE_F32: return 4;
    case BRIGADE_VALUE_U64: case BRIGADE_VALUE_I64: case BRIGADE_VALUE_F64: return 8;
    default: return 0;
    }
}

static inline uint64_t gguf_align_up(uint64_t x, uint64_t alignment)
{
    return (x + alignment - 1) / alignment * alignment;
}

#endif
