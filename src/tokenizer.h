/* Tokenizer internals shared by tokenizer.c (vocabulary, special tokens,
 * BPE, pieces, streaming detokenizer) and pretokenize.c (UTF-8 handling and
 * the regular expressions that split text into words before BPE).
 *
 * The behaviour followed throughout is llama.cpp's (src/llama-vocab.cpp,
 * src/unicode.cpp), so that brigade and llama.cpp give the same ids. */
#ifndef BG_TOKENIZER_H
#define BG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade.h"

/* ------------------------------------------------------------------ UTF-8 */

/* Decodes one code point as llama.cpp's unicode_cpts_from_utf8 does: the
 * lead byte's length is trusted and only the continuation bytes' top bits
 * are checked, so overlong forms and surrogates decode to their value. A
 * malformed or truncated sequence gives U+FFFD and advances one byte.
 * Values above U+10FFFF (llama.cpp throws on them) are treated as malformed.
 * n >= 1. */
uint32_t bg_utf8_decode(const uint8_t *s, size_t n, size_t *adv);

/* Canonical UTF-8 of cp (<= 0x10FFFF, surrogates encoded as they are);
 * returns 1..4. */
unsigned bg_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Length of the longest prefix of s that is well-formed UTF-8 (no overlong
 * forms, surrogates or values above U+10FFFF). Text that is well-formed
 * throughout decodes and re-encodes to itself. */
size_t bg_utf8_valid_prefix(const uint8_t *s, size_t n);

/* Whether b can follow lead byte `lead` in a well-formed sequence (E0, ED,
 * F0 and F4 restrict the second byte to exclude overlong forms, surrogates
 * and values above U+10FFFF). */
bool bg_utf8_second_byte_ok(uint8_t lead, uint8_t b);

/* Bytes needed by a well-formed sequence starting with lead byte b: 1..4, or
 * 0 if b cannot start one (a continuation byte, C0, C1, F5..FF). */
unsigned bg_utf8_seq_len(uint8_t b);

/* ----------------------------------------------------------- pre-tokenizer */

typedef enum bg_pretok_kind {
    BG_PRETOK_GPT2,   /* "gpt-2" */
    BG_PRETOK_LLAMA3, /* "llama-bpe" */
    BG_PRETOK_QWEN2,  /* "qwen2" */
    BG_PRETOK_QWEN35, /* "qwen35" */
} bg_pretok_kind;

typedef struct bg_pretok bg_pretok;

/* Compiles the kind's expression (PCRE2, JIT when available). */
brigade_status bg_pretok_create(bg_pretok_kind kind, bg_pretok **out, brigade_error *err);
void bg_pretok_free(bg_pretok *p);

/* Per-call buffers of bg_pretok_split, reused across the fragments of one
 * tokenize call. Zero-initialise; release with bg_pretok_scratch_free. */
typedef struct bg_pretok_scratch {
    void *match_data;          /* pcre2_match_data */
    uint8_t *subject, *output; /* normalised text when the input is not UTF-8 */
    size_t cap;
} bg_pretok_scratch;

void bg_pretok_scratch_free(bg_pretok_scratch *s);

/* Receives each word in order: its bytes are the canonical UTF-8 of the
 * fragment's code points (malformed input replaced by U+FFFD as llama.cpp
 * does). Returns false to stop (out of memory). */
typedef bool (*bg_word_fn)(void *user, const uint8_t *word, size_t len);

/* Splits text[0..len) into words. Text between the expression's matches
 * becomes a word of its own, as in llama.cpp. */
brigade_status bg_pretok_split(const bg_pretok *p, bg_pretok_scratch *s, const uint8_t *text,
                               size_t len, bg_word_fn fn, void *user, brigade_error *err);

/* The classes the expressions use, for tests: for each code point in
 * [first, first + count), bits BG_CLASS_* (surrogates: as U+E000, the
 * stand-in the splitter uses). False if PCRE2 fails. */
enum { BG_CLASS_L = 1, BG_CLASS_N = 2, BG_CLASS_M = 4, BG_CLASS_WS = 8 };
bool bg_pretok_classify(uint32_t first, uint32_t count, uint8_t *classes);

/* ---------------------------------------------------- vocabulary internals */

/* Token attributes (bit flags, as llama.cpp's llama_token_attr). */
enum {
    BG_ATTR_UNKNOWN = 1 << 0,
    BG_ATTR_UNUSED = 1 << 1,
    BG_ATTR_NORMAL = 1 << 2,
    BG_ATTR_CONTROL = 1 << 3,
    BG_ATTR_USER_DEFINED = 1 << 4,
    BG_ATTR_BYTE = 1 << 5,
};

/* Longest token text accepted; real vocabularies stay under 300 bytes. */
#define BG_TOKEN_MAX_LEN 1024
#define BG_NO_ID UINT32_MAX

/* Distinct byte strings numbered 0, 1, ... in insertion order, found by
 * open addressing. */
typedef struct bg_strset {
    uint8_t *blob;
    size_t blob_len, blob_cap;
    uint64_t *span; /* offset << 24 | length */
    uint32_t n, cap;
    uint32_t *slots; /* id + 1; 0 = empty */
    uint32_t mask;
} bg_strset;

static inline const uint8_t *bg_strset_str(const bg_strset *s, uint32_t id, size_t *len)
{
    *len = (size_t)(s->span[id] & 0xFFFFFF);
    return s->blob + (s->span[id] >> 24);
}

/* The id of p[0..n), or BG_NO_ID. */
uint32_t bg_strset_find(const bg_strset *s, const uint8_t *p, size_t n);

/* The merge table: open addressing on pairs of string ids. */
typedef struct bg_merge {
    uint32_t left, right; /* string ids; left == BG_NO_ID: empty slot */
    uint32_t rank;        /* position in tokenizer.ggml.merges */
    uint32_t merged;      /* string id of left + right */
} bg_merge;

static inline uint32_t bg_pair_slot(uint32_t left, uint32_t right, uint32_t mask)
{
    uint64_t k = ((uint64_t)left << 32 | right) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32) & mask;
}

/* Special-token texts in a trie, to find every occurrence in one pass. */
typedef struct bg_trie_node {
    uint32_t child, sibling; /* node indices, 0 = none (0 is the root) */
    int32_t special;         /* index into vocab->specials, or -1 */
    uint8_t byte;
} bg_trie_node;

struct brigade_vocab {
    int32_t n_tokens;
    bg_strset text;        /* token texts as stored; string id == token id */
    uint8_t *attr;         /* per token, BG_ATTR_* */
    uint8_t *pieces;       /* what each token renders as (control tokens too) */
    uint64_t *piece_span;  /* per token: offset << 24 | length in pieces */

    /* BPE over decoded bytes */
    bg_strset strings;     /* decoded token texts and merge parts */
    int32_t *string_token; /* per string id: the token, or -1 */
    bg_merge *merges;
    uint32_t merge_mask;
    uint32_t byte_string[256];         /* string id of each single byte */
    int32_t raw_byte_token[256];       /* token whose stored text is exactly this byte */
    uint8_t enc[256][2], enc_len[256]; /* GPT-2 encoding of each byte */
    bool ignore_merges;                /* llama-bpe: a word that is a token stays whole */
    bg_pretok *pretok;
    char pre[32];

    /* special tokens: control, user-defined and unknown, longest first */
    int32_t *specials;
    uint32_t n_specials;
    bg_trie_node *trie;
    uint32_t n_nodes;
    uint32_t root_child[256];

    brigade_special_tokens ids;
    int32_t eog[48]; /* more than the texts and roles that can add one */
    unsigned n_eog;
};

#endif
