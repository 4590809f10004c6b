/* The streaming detokenizer: token pieces in, text out that never ends
 * inside a UTF-8 character. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer.h"

struct brigade_detok {
    const brigade_vocab *vocab;
    bool special;
    uint8_t held[4]; /* the start of a character the next piece completes */
    unsigned n_held;
    char *buf;
    size_t cap;
};

brigade_status brigade_detok_create(const brigade_vocab *vocab, bool special,
                                    brigade_detok **out, brigade_error *err)
{
    *out = NULL;
    size_t longest = 0;
    for (int32_t i = 0; i < vocab->n_tokens; i++) {
        size_t n = vocab->piece_span[i] & 0xFFFFFF;
        if (n > longest)
            longest = n;
    }
    brigade_detok *d = calloc(1, sizeof *d);
    if (d)
        d->buf = malloc(longest + sizeof d->held);
    if (!d || !d->buf) {
        free(d);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for a detokenizer");
    }
    d->vocab = vocab;
    d->special = special;
    d->cap = longest + sizeof d->held;
    *out = d;
    return BRIGADE_OK;
}

void brigade_detok_free(brigade_detok *d)
{
    if (!d)
        return;
    free(d->buf);
    free(d);
}

void brigade_detok_reset(brigade_detok *d)
{
    d->n_held = 0;
}

/* Where a trailing, still incomplete but so far well-formed character
 * starts in s[0..n), or n if there is none. */
static size_t incomplete_tail(const uint8_t *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        uint8_t b = s[n - back];
        if ((b & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        unsigned need = bg_utf8_seq_len(b);
        if (need <= back)
            return n; /* ASCII, a complete character, or not a lead byte */
        if (back >= 2 && !bg_utf8_second_byte_ok(b, s[n - back + 1]))
            return n;
        return n - back;
    }
    return n;
}

brigade_status brigade_detok_push(brigade_detok *d, int32_t id, const char **text, size_t *len,
                                  brigade_error *err)
{
    *text = d->buf;
    *len = 0;
    if (id < 0 || id >= d->vocab->n_tokens)
        return bg_fail(err, BRIGADE_ERR_ARG, "token id %d is outside the vocabulary of %d",
                       (int)id, (int)d->vocab->n_tokens);
    brigade_string piece = brigade_token_piece(d->vocab, id, d->special);
    uint8_t *b = (uint8_t *)d->buf;
    size_t n = d->n_held;
    memcpy(b, d->held, n);
    memcpy(b + n, piece.ptr, piece.len);
    n += piece.len;
    size_t keep = incomplete_tail(b, n);
    d->n_held = (unsigned)(n - keep);
    memcpy(d->held, b + keep, d->n_held);
    *len = keep;
    return BRIGADE_OK;
}

void brigade_detok_flush(brigade_detok *d, const char **text, size_t *len)
{
    memcpy(d->buf, d->held, d->n_held);
    *text = d->buf;
    *len = d->n_held;
    d->n_held = 0;
}
