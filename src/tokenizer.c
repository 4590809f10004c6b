/* Byte-level BPE (tokenizer.ggml.model "gpt2"), as llama.cpp runs it:
 *
 *   text --special tokens--> fragments --pre-tokenizer--> words --BPE--> ids
 *
 * Special tokens (control tokens with parse_special, user-defined tokens
 * always) are cut out of the raw text first, longest text first. Each
 * remaining fragment is split into words (pretokenize.c); each word's bytes
 * start as one symbol per byte and the adjacent pair with the lowest merge
 * rank (leftmost on ties) is merged until no pair has a rank.
 *
 * Tokens are stored in GGUF in GPT-2's byte-to-character encoding ("Ġthe"
 * for " the"). Everything the BPE loop touches is decoded to raw bytes at
 * load and interned: a symbol is a string id, a merge is a hash lookup of a
 * pair of string ids, and no text is built or compared while tokenizing. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer.h"

/* ------------------------------------------------------------ queries */

int32_t brigade_vocab_n_tokens(const brigade_vocab *v)
{
    return v->n_tokens;
}

brigade_special_tokens brigade_vocab_specials(const brigade_vocab *v)
{
    return v->ids;
}

const char *brigade_vocab_pre(const brigade_vocab *v)
{
    return v->pre;
}

brigade_token_kind brigade_vocab_token_kind(const brigade_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_tokens)
        return BRIGADE_TOKEN_UNDEFINED;
    uint8_t a = v->attr[id];
    if (a & BG_ATTR_CONTROL)
        return BRIGADE_TOKEN_CONTROL;
    if (a & BG_ATTR_USER_DEFINED)
        return BRIGADE_TOKEN_USER_DEFINED;
    if (a & BG_ATTR_UNKNOWN)
        return BRIGADE_TOKEN_UNKNOWN;
    if (a & BG_ATTR_BYTE)
        return BRIGADE_TOKEN_BYTE;
    if (a & BG_ATTR_UNUSED)
        return BRIGADE_TOKEN_UNUSED;
    if (a & BG_ATTR_NORMAL)
        return BRIGADE_TOKEN_NORMAL;
    return BRIGADE_TOKEN_UNDEFINED;
}

brigade_string brigade_vocab_token_text(const brigade_vocab *v, int32_t id)
{
    if (id < 0 || id >= v->n_tokens)
        return (brigade_string){"", 0};
    size_t n;
    const uint8_t *t = bg_strset_str(&v->text, (uint32_t)id, &n);
    return (brigade_string){(const char *)t, n};
}

int32_t brigade_vocab_find(const brigade_vocab *v, const char *text, size_t len)
{
    if (!text)
        return -1;
    uint32_t id = bg_strset_find(&v->text, (const uint8_t *)text, len);
    return id == BG_NO_ID ? -1 : (int32_t)id;
}

bool brigade_vocab_is_eog(const brigade_vocab *v, int32_t id)
{
    for (unsigned i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return true;
    return false;
}

brigade_string brigade_token_piece(const brigade_vocab *v, int32_t id, bool special)
{
    if (id < 0 || id >= v->n_tokens)
        return (brigade_string){"", 0};
    if (!special && (v->attr[id] & (BG_ATTR_CONTROL | BG_ATTR_UNKNOWN)))
        return (brigade_string){"", 0};
    uint64_t span = v->piece_span[id];
    return (brigade_string){(const char *)v->pieces + (span >> 24), span & 0xFFFFFF};
}

/* ------------------------------------------------------------ tokenizing */

typedef struct sym {
    uint32_t string; /* string id */
    uint32_t len;    /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;
} sym;

typedef struct pair {
    uint32_t rank;
    int32_t left, right;
    uint32_t size;   /* left.len + right.len when the pair was found */
    uint32_t merged; /* string id of the result */
} pair;

typedef struct candidate {
    size_t pos;
    uint32_t special; /* index into vocab->specials: its priority */
} candidate;

typedef struct run {
    const brigade_vocab *v;
    int32_t *ids;
    size_t cap, n;
    sym *syms;
    pair *heap;
    size_t sym_cap, heap_n, heap_cap;
    bool oom;
    candidate *cands;
    size_t n_cands, cands_cap;
} run;

static inline void emit(run *r, int32_t id)
{
    if (r->n < r->cap)
        r->ids[r->n] = id;
    r->n++;
}

/* A finished symbol: its token, or (llama.cpp's fallback when the merged
 * text is not a token) the tokens whose stored text is one byte of the
 * symbol's encoded text. */
static void emit_string(run *r, uint32_t string)
{
    const brigade_vocab *v = r->v;
    int32_t t = v->string_token[string];
    if (t >= 0) {
        emit(r, t);
        return;
    }
    size_t n;
    const uint8_t *s = bg_strset_str(&v->strings, string, &n);
    for (size_t i = 0; i < n; i++)
        for (unsigned k = 0; k < v->enc_len[s[i]]; k++) {
            int32_t b = v->raw_byte_token[v->enc[s[i]][k]];
            if (b >= 0)
                emit(r, b);
        }
}

static inline bool pair_less(const pair *a, const pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(run *r, pair p)
{
    if (r->heap_n == r->heap_cap) {
        size_t cap = r->heap_cap ? 2 * r->heap_cap : 256;
        pair *h = realloc(r->heap, cap * sizeof *h);
        if (!h) {
            r->oom = true;
            return;
        }
        r->heap = h;
        r->heap_cap = cap;
    }
    size_t i = r->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_less(&p, &r->heap[up]))
            break;
        r->heap[i] = r->heap[up];
        i = up;
    }
    r->heap[i] = p;
}

static pair heap_pop(run *r)
{
    pair top = r->heap[0], last = r->heap[--r->heap_n];
    size_t i = 0, n = r->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && pair_less(&r->heap[c + 1], &r->heap[c]))
            c++;
        if (!pair_less(&r->heap[c], &last))
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (n)
        r->heap[i] = last;
    return top;
}

static inline const bg_merge *find_merge(const brigade_vocab *v, uint32_t left, uint32_t right)
{
    for (uint32_t i = bg_pair_slot(left, right, v->merge_mask);; i = (i + 1) & v->merge_mask) {
        const bg_merge *m = &v->merges[i];
        if (m->left == left && m->right == right)
            return m;
        if (m->left == BG_NO_ID)
            return NULL;
    }
}

static inline void try_pair(run *r, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    const bg_merge *m = find_merge(r->v, r->syms[left].string, r->syms[right].string);
    if (m)
        heap_push(r, (pair){m->rank, left, right, r->syms[left].len + r->syms[right].len,
                            m->merged});
}

static bool bpe_word(void *user, const uint8_t *w, size_t n)
{
    run *r = user;
    const brigade_vocab *v = r->v;
    if (n == 1) {
        emit_string(r, v->byte_string[w[0]]);
        return true;
    }
    if (v->ignore_merges) {
        uint32_t s = n <= 2 * BG_TOKEN_MAX_LEN ? bg_strset_find(&v->strings, w, n) : BG_NO_ID;
        if (s != BG_NO_ID && v->string_token[s] >= 0) {
            emit(r, v->string_token[s]);
            return true;
        }
    }
    if (n > INT32_MAX)
        return false;
    if (r->sym_cap < n) {
        size_t cap = r->sym_cap ? r->sym_cap : 64;
        while (cap < n)
            cap *= 2;
        sym *s = realloc(r->syms, cap * sizeof *s);
        if (!s)
            return false;
        r->syms = s;
        r->sym_cap = cap;
    }
    sym *syms = r->syms;
    for (size_t i = 0; i < n; i++)
        syms[i] = (sym){v->byte_string[w[i]], 1, (int32_t)i - 1,
                        i + 1 < n ? (int32_t)i + 1 : -1};
    r->heap_n = 0;
    for (size_t i = 1; i < n; i++)
        try_pair(r, (int32_t)i - 1, (int32_t)i);
    while (r->heap_n) {
        pair p = heap_pop(r);
        sym *a = &syms[p.left], *b = &syms[p.right];
        if (a->len == 0 || b->len == 0 || a->next != p.right || a->len + b->len != p.size)
            continue; /* stale: one side has changed since */
        a->string = p.merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0)
            syms[b->next].prev = p.left;
        try_pair(r, a->prev, p.left);
        try_pair(r, p.left, a->next);
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next)
        emit_string(r, syms[i].string);
    return !r->oom;
}

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->special != y->special)
        return x->special < y->special ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_candidate_pos(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Every occurrence of every special token that may be recognised. */
static bool find_specials(run *r, const uint8_t *text, size_t len, bool parse_special)
{
    const brigade_vocab *v = r->v;
    r->n_cands = 0;
    for (size_t p = 0; p < len; p++) {
        uint32_t node = v->root_child[text[p]];
        for (size_t k = p + 1; node; k++) {
            int32_t s = v->trie[node].special;
            if (s >= 0 && (parse_special || (v->attr[v->specials[s]] & BG_ATTR_USER_DEFINED))) {
                if (r->n_cands == r->cands_cap) {
                    size_t cap = r->cands_cap ? 2 * r->cands_cap : 64;
                    candidate *c = realloc(r->cands, cap * sizeof *c);
                    if (!c)
                        return false;
                    r->cands = c;
                    r->cands_cap = cap;
                }
                r->cands[r->n_cands++] = (candidate){p, (uint32_t)s};
            }
            if (k == len)
                break;
            uint32_t c = v->trie[node].child;
            while (c && v->trie[c].byte != text[k])
                c = v->trie[c].sibling;
            node = c;
        }
    }
    return true;
}

brigade_status brigade_tokenize(const brigade_vocab *v, const char *text, size_t len,
                                bool add_special, bool parse_special, int32_t *ids, size_t cap,
                                size_t *n, brigade_error *err)
{
    *n = 0;
    if (!v || (!text && len) || (!ids && cap))
        return bg_fail(err, BRIGADE_ERR_ARG, "brigade_tokenize: NULL vocabulary, text or ids");
    run r = {.v = v, .ids = ids, .cap = cap};
    bg_pretok_scratch scratch = {0};
    brigade_status st = BRIGADE_OK;
    const uint8_t *t = (const uint8_t *)text;
    uint8_t *claimed = NULL;

    if (add_special && v->ids.add_bos)
        emit(&r, v->ids.bos);
    if (!find_specials(&r, t, len, parse_special))
        goto oom;
    if (r.n_cands) {
        /* Token by token in priority order, each occurrence left to right,
         * as long as it does not overlap text an earlier one took: the
         * outcome of llama.cpp's repeated splitting of fragments. */
        qsort(r.cands, r.n_cands, sizeof *r.cands, cmp_candidate);
        claimed = calloc(len, 1);
        if (!claimed)
            goto oom;
        size_t kept = 0;
        for (size_t i = 0; i < r.n_cands; i++) {
            candidate c = r.cands[i];
            size_t tl = v->text.span[v->specials[c.special]] & 0xFFFFFF;
            if (memchr(claimed + c.pos, 1, tl))
                continue;
            memset(claimed + c.pos, 1, tl);
            r.cands[kept++] = c;
        }
        r.n_cands = kept;
        qsort(r.cands, r.n_cands, sizeof *r.cands, cmp_candidate_pos);
    }
    size_t pos = 0;
    for (size_t i = 0; i <= r.n_cands && !st; i++) {
        size_t end = i < r.n_cands ? r.cands[i].pos : len;
        if (end > pos)
            st = bg_pretok_split(v->pretok, &scratch, t + pos, end - pos, bpe_word, &r, err);
        if (i < r.n_cands) {
            int32_t id = v->specials[r.cands[i].special];
            emit(&r, id);
            pos = end + (v->text.span[id] & 0xFFFFFF);
        }
    }
    if (!st && add_special && v->ids.add_eos)
        emit(&r, v->ids.eos);
    goto done;
oom:
    st = bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
done:
    *n = r.n;
    free(claimed);
    free(r.syms);
    free(r.heap);
    free(r.cands);
    bg_pretok_scratch_free(&scratch);
    return st;
}
