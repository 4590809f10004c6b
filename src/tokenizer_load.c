/* Loading a byte-level BPE vocabulary from GGUF metadata, as llama.cpp's
 * llama_vocab::impl::load reads it for tokenizer.ggml.model "gpt2":
 * tokens and their types (with the overrides llama.cpp applies by text),
 * merges, special ids, add_bos/add_eos and the pre-tokenizer. Everything
 * is checked against the file: array types and lengths, token lengths,
 * special ids within the vocabulary, merges of two parts.
 *
 * Token texts are stored in GPT-2's byte-to-character encoding; the BPE
 * tables are built over the decoded bytes (see tokenizer.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "keys.h"
#include "tokenizer.h"

/* All pieces together; a piece is at most a few times its token's text. */
#define PIECES_MAX_BYTES (256u << 20)

/* ------------------------------------------------------------ string sets */

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

static void strset_free(bg_strset *s)
{
    free(s->blob);
    free(s->span);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

static bool strset_init(bg_strset *s, uint32_t expected)
{
    memset(s, 0, sizeof *s);
    uint32_t slots = 1024;
    while (slots < expected * 2u && slots < (1u << 30))
        slots *= 2;
    s->slots = calloc(slots, sizeof *s->slots);
    s->mask = slots - 1;
    return s->slots != NULL;
}

uint32_t bg_strset_find(const bg_strset *s, const uint8_t *p, size_t n)
{
    for (uint32_t i = (uint32_t)hash_bytes(p, n) & s->mask;; i = (i + 1) & s->mask) {
        uint32_t e = s->slots[i];
        if (!e)
            return BG_NO_ID;
        size_t len;
        const uint8_t *str = bg_strset_str(s, e - 1, &len);
        if (len == n && memcmp(str, p, n) == 0)
            return e - 1;
    }
}

static bool strset_grow(bg_strset *s)
{
    uint32_t slots = (s->mask + 1) * 2;
    uint32_t *t = calloc(slots, sizeof *t);
    if (!t)
        return false;
    for (uint32_t id = 0; id < s->n; id++) {
        size_t len;
        const uint8_t *str = bg_strset_str(s, id, &len);
        uint32_t i = (uint32_t)hash_bytes(str, len) & (slots - 1);
        while (t[i])
            i = (i + 1) & (slots - 1);
        t[i] = id + 1;
    }
    free(s->slots);
    s->slots = t;
    s->mask = slots - 1;
    return true;
}

/* The id of p[0..n), added if new; *added tells which. BG_NO_ID when out of
 * memory. n < 2^24. */
static uint32_t strset_add(bg_strset *s, const uint8_t *p, size_t n, bool *added)
{
    *added = false;
    uint32_t id = bg_strset_find(s, p, n);
    if (id != BG_NO_ID)
        return id;
    if ((uint64_t)(s->n + 1) * 2 > (uint64_t)s->mask + 1 && !strset_grow(s))
        return BG_NO_ID;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *span = realloc(s->span, (size_t)cap * sizeof *span);
        if (!span)
            return BG_NO_ID;
        s->span = span;
        s->cap = cap;
    }
    if (s->blob_len + n > s->blob_cap) {
        size_t cap = s->blob_cap ? s->blob_cap : 1 << 16;
        while (cap < s->blob_len + n)
            cap *= 2;
        uint8_t *blob = realloc(s->blob, cap);
        if (!blob)
            return BG_NO_ID;
        s->blob = blob;
        s->blob_cap = cap;
    }
    if (n)
        memcpy(s->blob + s->blob_len, p, n);
    id = s->n++;
    s->span[id] = (uint64_t)s->blob_len << 24 | n;
    s->blob_len += n;
    uint32_t i = (uint32_t)hash_bytes(p, n) & s->mask;
    while (s->slots[i])
        i = (i + 1) & s->mask;
    s->slots[i] = id + 1;
    *added = true;
    return id;
}

/* GPT-2's byte-to-character map: printable Latin-1 bytes stand for
 * themselves; the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) for U+0100 upwards
 * in order. */
static uint32_t byte_char(unsigned b)
{
    if (b <= 0x20)
        return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD)
        return 0x100 + 67;
    return b;
}

/* The byte a character of the encoding stands for, or -1. */
static int char_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x100 + 67)
        return -1;
    unsigned n = cp - 0x100;
    return n < 33 ? (int)n : n < 67 ? (int)(0x7F + n - 33) : 0xAD;
}

/* Decodes GPT-2-encoded text into out (at most n bytes); false if the text
 * is not well-formed UTF-8 or some character is not part of the encoding. */
static bool decode_gpt2(const uint8_t *s, size_t n, uint8_t *out, size_t *out_len)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned k = bg_utf8_seq_len(s[i]);
        if (k == 0 || n - i < k || bg_utf8_valid_prefix(s + i, k) != k)
            return false;
        size_t adv;
        int b = char_byte(bg_utf8_decode(s + i, n - i, &adv));
        if (b < 0)
            return false;
        out[o++] = (uint8_t)b;
        i += adv;
    }
    *out_len = o;
    return true;
}

static bool contains(const uint8_t *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return true;
    return false;
}

static void append(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n, bool *oom)
{
    if (*oom)
        return;
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 1 << 16;
        while (c < *len + n)
            c *= 2;
        uint8_t *b = realloc(*buf, c);
        if (!b) {
            *oom = true;
            return;
        }
        *buf = b;
        *cap = c;
    }
    if (n)
        memcpy(*buf + *len, p, n);
    *len += n;
}

/* What llama.cpp's token_to_piece gives with special = true. */
static void make_piece(const brigade_vocab *v, int32_t id, uint8_t **buf, size_t *len, size_t *cap,
                       bool *oom)
{
    size_t n;
    const uint8_t *text = bg_strset_str(&v->text, (uint32_t)id, &n);
    uint8_t a = v->attr[id];
    if (a & (BG_ATTR_UNKNOWN | BG_ATTR_CONTROL | BG_ATTR_USER_DEFINED)) {
        append(buf, len, cap, text, n, oom);
    } else if (a & BG_ATTR_NORMAL) {
        /* Character by character back to bytes; a character outside the
         * encoding becomes "[UNK_BYTE_0x<its UTF-8 in hex><token text>]". */
        for (size_t i = 0; i < n;) {
            size_t adv;
            uint32_t cp = bg_utf8_decode(text + i, n - i, &adv);
            i += adv;
            int b = char_byte(cp);
            if (b >= 0) {
                uint8_t c = (uint8_t)b;
                append(buf, len, cap, &c, 1, oom);
                continue;
            }
            uint8_t u[4];
            unsigned k = bg_utf8_encode(cp, u);
            char hex[16 + 8];
            append(buf, len, cap, "[UNK_BYTE_0x", 12, oom);
            for (unsigned j = 0; j < k; j++) {
                snprintf(hex, sizeof hex, "%02x", u[j]);
                append(buf, len, cap, hex, 2, oom);
            }
            append(buf, len, cap, text, n, oom);
            append(buf, len, cap, "]", 1, oom);
        }
    } else if (a & BG_ATTR_BYTE) {
        /* "<0xAB>": up to two characters after "<0x", read as strtol reads
         * hex (llama.cpp's substr(3, 2)). */
        char hex[3] = {n > 3 ? (char)text[3] : 0, n > 4 ? (char)text[4] : 0, 0};
        uint8_t c = (uint8_t)strtol(hex, NULL, 16);
        append(buf, len, cap, &c, 1, oom);
    }
}

/* ------------------------------------------------------------ loading */

static const struct {
    const char *name;
    bg_pretok_kind kind;
    bool ignore_merges, add_bos;
} pre_tokenizers[] = {
    {"qwen35", BG_PRETOK_QWEN35, false, false},
    {"qwen2", BG_PRETOK_QWEN2, false, false},
    {"llama-bpe", BG_PRETOK_LLAMA3, true, true},
    {"llama3", BG_PRETOK_LLAMA3, true, true},
    {"llama-v3", BG_PRETOK_LLAMA3, true, true},
    {"gpt-2", BG_PRETOK_GPT2, false, false},
};

#define SUPPORTED_PRE "qwen35, qwen2, llama-bpe (or llama3, llama-v3), gpt-2"

/* Texts llama.cpp promotes to control tokens and end-of-generation. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
    "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
    "<end_of_utterance>", NULL,
};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\357\275\234fim\342\226\201begin\357\275\234>", "<PRE>", "\342\226\201<PRE>",
    "<|code_prefix|>", "<|prefix|>", NULL,
};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\357\275\234fim\342\226\201hole\357\275\234>", "<SUF>", "\342\226\201<SUF>",
    "<|code_suffix|>", "<|suffix|>", NULL,
};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\357\275\234fim\342\226\201end\357\275\234>", "<MID>", "\342\226\201<MID>",
    "<|code_middle|>", "<|middle|>", NULL,
};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                            "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
    "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>", "[e~[", NULL,
};

static int32_t find_text(const brigade_vocab *v, const char *s)
{
    uint32_t id = bg_strset_find(&v->text, (const uint8_t *)s, strlen(s));
    return id == BG_NO_ID ? -1 : (int32_t)id;
}

static bool text_is(const brigade_vocab *v, int32_t id, const char *s)
{
    size_t n;
    const uint8_t *t = bg_strset_str(&v->text, (uint32_t)id, &n);
    return n == strlen(s) && memcmp(t, s, n) == 0;
}

static void add_eog(brigade_vocab *v, int32_t id)
{
    if (id < 0)
        return;
    for (unsigned i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id)
            return;
    if (v->n_eog < sizeof v->eog / sizeof *v->eog)
        v->eog[v->n_eog++] = id;
}

static void remove_eog(brigade_vocab *v, int32_t id)
{
    for (unsigned i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) {
            v->eog[i] = v->eog[--v->n_eog];
            return;
        }
}

/* When the file names no id for a role, llama.cpp looks for the usual
 * texts and makes the token found a control token. (llama.cpp takes the
 * first in its hash map's order when several exist; brigade the first in
 * the list.) */
static int32_t detect(brigade_vocab *v, int32_t id, const char *const *texts)
{
    if (id >= 0)
        return id;
    for (const char *const *t = texts; *t; t++) {
        int32_t found = find_text(v, *t);
        if (found >= 0) {
            v->attr[found] |= BG_ATTR_CONTROL;
            return found;
        }
    }
    return -1;
}

/* The token-type overrides and end-of-generation set of llama.cpp's
 * llama_vocab::impl::load, for the parts that concern these vocabularies'
 * texts. ids: eot, eom and the fim roles as read from the file (-1 if
 * absent). */
static void apply_overrides(brigade_vocab *v, int32_t eom, const int32_t fim[6])
{
    static const char *const *const fim_texts[6] = {fim_pre_texts, fim_suf_texts, fim_mid_texts,
                                                     fim_pad_texts, fim_rep_texts, fim_sep_texts};
    v->ids.eot = detect(v, v->ids.eot, eot_texts);
    eom = detect(v, eom, eom_texts);
    int32_t f[6];
    for (int i = 0; i < 6; i++)
        f[i] = detect(v, fim[i], fim_texts[i]);
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t n;
        const uint8_t *t = bg_strset_str(&v->text, (uint32_t)id, &n);
        if ((v->attr[id] & BG_ATTR_CONTROL) && contains(t, n, "unused"))
            v->attr[id] |= BG_ATTR_UNUSED;
    }
    for (int i = 3; i < 6; i++) /* fim pad, repo, sep */
        add_eog(v, f[i]);
    for (const char *const *t = eog_texts; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0) {
            add_eog(v, id);
            v->attr[id] |= BG_ATTR_CONTROL;
        }
    }
    /* gpt-oss: these always render */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>",
                                        "<|constrain|>", NULL};
    for (const char *const *t = shown; *t; t++) {
        int32_t id = find_text(v, *t);
        if (id >= 0)
            v->attr[id] = BG_ATTR_USER_DEFINED;
    }
    add_eog(v, v->ids.eos);
    add_eog(v, v->ids.eot);
    add_eog(v, eom);
    /* o200k_harmony and solar-open: "<|end|>" ends a message, not the turn */
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    int32_t end = -1, s_end = -1;
    for (unsigned i = 0; i < v->n_eog; i++) {
        int32_t id = v->eog[i];
        has_return |= text_is(v, id, "<|return|>");
        has_call |= text_is(v, id, "<|call|>") || text_is(v, id, "<|calls|>");
        has_flush |= text_is(v, id, "<|flush|>");
        has_tool_response |= text_is(v, id, "<|tool_response>");
        if (text_is(v, id, "<|end|>"))
            end = id;
        if (text_is(v, id, "</s>"))
            s_end = id;
    }
    if (end >= 0 && has_call && (has_return || has_flush)) {
        remove_eog(v, end);
        v->attr[end] = BG_ATTR_USER_DEFINED;
    }
    if (s_end >= 0 && has_tool_response) {
        remove_eog(v, s_end);
        v->attr[s_end] = BG_ATTR_NORMAL;
    }
}

static brigade_status get_bool(const brigade_gguf *f, const char *key, bool *out,
                               brigade_error *err)
{
    const brigade_value *val = brigade_gguf_get(f, key);
    if (!val)
        return BRIGADE_OK;
    if (val->type != BRIGADE_VALUE_BOOL)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: expected a bool, found %s", key,
                       brigade_value_type_name(val->type));
    *out = val->as.b;
    return BRIGADE_OK;
}

/* A special-token id from the file; -1 if absent. */
static brigade_status get_id(const brigade_gguf *f, const char *key, int32_t n_tokens,
                             bool strict, int32_t *out, brigade_error *err)
{
    uint32_t id = BG_NO_ID;
    brigade_status st = brigade_gguf_get_u32(f, key, false, &id, err);
    if (st)
        return st;
    if (id != BG_NO_ID && id >= (uint32_t)n_tokens) {
        if (strict)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s = %u is outside the vocabulary of %d tokens", key, id, n_tokens);
        id = BG_NO_ID; /* llama.cpp ignores such an id with a warning */
    }
    *out = id == BG_NO_ID ? -1 : (int32_t)id;
    return BRIGADE_OK;
}

static brigade_status nomem(brigade_error *err)
{
    return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory loading the vocabulary");
}

static brigade_status load_tokens(brigade_vocab *v, const brigade_gguf *f, brigade_error *err)
{
    const brigade_value *tokens = brigade_gguf_get(f, KEY_TOK_TOKENS);
    if (!tokens)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s is missing", KEY_TOK_TOKENS);
    if (tokens->type != BRIGADE_VALUE_ARRAY || tokens->elem_type != BRIGADE_VALUE_STRING)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: expected an array of strings", KEY_TOK_TOKENS);
    if (tokens->count == 0 || tokens->count > (1u << 24))
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: %llu tokens (expected 1 to %u)",
                       KEY_TOK_TOKENS, (unsigned long long)tokens->count, 1u << 24);
    v->n_tokens = (int32_t)tokens->count;

    const brigade_value *types = brigade_gguf_get(f, KEY_TOK_TYPES);
    const int32_t *type = NULL;
    if (types) {
        if (types->type != BRIGADE_VALUE_ARRAY || types->elem_type != BRIGADE_VALUE_I32)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: expected an array of i32",
                           KEY_TOK_TYPES);
        if (types->count != tokens->count)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s has %llu entries for %llu tokens",
                           KEY_TOK_TYPES, (unsigned long long)types->count,
                           (unsigned long long)tokens->count);
        type = types->as.numbers;
    }
    v->attr = malloc((size_t)v->n_tokens);
    if (!v->attr || !strset_init(&v->text, (uint32_t)v->n_tokens))
        return nomem(err);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        brigade_string s = tokens->as.strings[i];
        char empty[32];
        if (s.len == 0) { /* llama.cpp names empty tokens this way */
            int k = snprintf(empty, sizeof empty, "[EMPTY_%d]", (int)i);
            s = (brigade_string){empty, (uint64_t)k};
        }
        if (s.len > BG_TOKEN_MAX_LEN)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s[%d] is %llu bytes long (at most %d)",
                           KEY_TOK_TOKENS, (int)i, (unsigned long long)s.len, BG_TOKEN_MAX_LEN);
        if (memchr(s.ptr, 0, s.len))
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s[%d] contains a NUL byte",
                           KEY_TOK_TOKENS, (int)i);
        bool added;
        uint32_t id = strset_add(&v->text, (const uint8_t *)s.ptr, s.len, &added);
        if (id == BG_NO_ID)
            return nomem(err);
        if (!added)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s[%d] '%.*s' repeats token %u",
                           KEY_TOK_TOKENS, (int)i, (int)(s.len > 64 ? 64 : s.len), s.ptr, id);
        static const uint8_t attr_of_type[7] = {
            0, BG_ATTR_NORMAL, BG_ATTR_UNKNOWN, BG_ATTR_CONTROL, BG_ATTR_USER_DEFINED,
            BG_ATTR_UNUSED, BG_ATTR_BYTE,
        };
        int32_t t = type ? type[i] : 1;
        v->attr[i] = t >= 0 && t <= 6 ? attr_of_type[t] : 0;
        if ((v->attr[i] & BG_ATTR_BYTE) && s.len < 3) /* llama.cpp throws on these */
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s[%d] '%.*s' is a byte token but not of the form <0xAB>",
                           KEY_TOK_TOKENS, (int)i, (int)s.len, s.ptr);
    }
    return BRIGADE_OK;
}

/* The string id of decoded text that need not be a token; BG_NO_ID when
 * out of memory. */
static uint32_t intern(brigade_vocab *v, const uint8_t *p, size_t n)
{
    bool added;
    uint32_t id = strset_add(&v->strings, p, n, &added);
    if (id != BG_NO_ID && added)
        v->string_token[id] = -1;
    return id;
}

/* Decoded token texts, single bytes and merge parts as string ids; the
 * merge table keyed by pairs of them. */
static brigade_status load_merges(brigade_vocab *v, const brigade_gguf *f, brigade_error *err)
{
    const brigade_value *merges = brigade_gguf_get(f, KEY_TOK_MERGES);
    if (!merges)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s is missing", KEY_TOK_MERGES);
    if (merges->type != BRIGADE_VALUE_ARRAY || merges->elem_type != BRIGADE_VALUE_STRING)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: expected an array of strings", KEY_TOK_MERGES);
    if (merges->count > (1u << 24))
        return bg_fail(err, BRIGADE_ERR_FORMAT, "%s: %llu merges (at most %u)", KEY_TOK_MERGES,
                       (unsigned long long)merges->count, 1u << 24);
    uint32_t n_merges = (uint32_t)merges->count;

    if (!strset_init(&v->strings, (uint32_t)v->n_tokens + n_merges))
        return nomem(err);
    uint8_t buf[2 * BG_TOKEN_MAX_LEN + 8];
    size_t cap_tokens = (size_t)v->n_tokens + 256 + 3 * (size_t)n_merges;
    v->string_token = malloc(cap_tokens * sizeof *v->string_token);
    if (!v->string_token)
        return nomem(err);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        size_t n, dn;
        const uint8_t *t = bg_strset_str(&v->text, (uint32_t)i, &n);
        if (!decode_gpt2(t, n, buf, &dn))
            continue;
        bool added;
        uint32_t sid = strset_add(&v->strings, buf, dn, &added);
        if (sid == BG_NO_ID)
            return nomem(err);
        v->string_token[sid] = i;
    }
    for (unsigned b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        bool added;
        uint32_t sid = strset_add(&v->strings, &c, 1, &added);
        if (sid == BG_NO_ID)
            return nomem(err);
        if (added)
            v->string_token[sid] = -1;
        v->byte_string[b] = sid;
        uint32_t cp = byte_char(b);
        v->enc_len[b] = (uint8_t)bg_utf8_encode(cp, v->enc[b]);
        uint32_t raw = bg_strset_find(&v->text, &c, 1);
        v->raw_byte_token[b] = raw == BG_NO_ID ? -1 : (int32_t)raw;
    }

    uint32_t slots = 1024;
    while (slots < n_merges * 2u)
        slots *= 2;
    v->merges = malloc((size_t)slots * sizeof *v->merges);
    if (!v->merges)
        return nomem(err);
    v->merge_mask = slots - 1;
    for (uint32_t i = 0; i < slots; i++)
        v->merges[i].left = BG_NO_ID;

    for (uint32_t r = 0; r < n_merges; r++) {
        brigade_string m = merges->as.strings[r];
        if (m.len > 2 * BG_TOKEN_MAX_LEN)
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s[%u] is %llu bytes long", KEY_TOK_MERGES,
                           r, (unsigned long long)m.len);
        if (memchr(m.ptr, 0, m.len))
            return bg_fail(err, BRIGADE_ERR_FORMAT, "%s[%u] contains a NUL byte", KEY_TOK_MERGES,
                           r);
        /* "left right", split at the first space after the first byte */
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s[%u] '%.*s' is not two tokens separated by a space",
                           KEY_TOK_MERGES, r, (int)(m.len > 64 ? 64 : m.len), m.ptr);
        size_t ln = (size_t)(sp - m.ptr), rn = m.len - ln - 1, dl, dr;
        /* A part that is not GPT-2-encoded text (or is empty) can never
         * equal a symbol: llama.cpp keeps such a merge, it just never applies. */
        if (rn == 0 || !decode_gpt2((const uint8_t *)m.ptr, ln, buf, &dl) ||
            !decode_gpt2((const uint8_t *)sp + 1, rn, buf + dl, &dr))
            continue;
        uint32_t left = intern(v, buf, dl), right = intern(v, buf + dl, dr);
        uint32_t both = intern(v, buf, dl + dr);
        if (left == BG_NO_ID || right == BG_NO_ID || both == BG_NO_ID)
            return nomem(err);
        uint32_t i = bg_pair_slot(left, right, v->merge_mask);
        while (v->merges[i].left != BG_NO_ID &&
               !(v->merges[i].left == left && v->merges[i].right == right))
            i = (i + 1) & v->merge_mask;
        if (v->merges[i].left == BG_NO_ID) /* the first of duplicate merges wins */
            v->merges[i] = (bg_merge){left, right, r, both};
    }
    return BRIGADE_OK;
}

typedef struct by_length {
    uint32_t len;
    int32_t id;
} by_length;

static int cmp_length(const void *a, const void *b)
{
    const by_length *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static brigade_status build_specials(brigade_vocab *v, brigade_error *err)
{
    uint32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        n += (v->attr[i] & (BG_ATTR_CONTROL | BG_ATTR_USER_DEFINED | BG_ATTR_UNKNOWN)) != 0;
    v->specials = malloc((n ? n : 1) * sizeof *v->specials);
    by_length *order = malloc((n ? n : 1) * sizeof *order);
    if (!v->specials || !order) {
        free(order);
        return nomem(err);
    }
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (BG_ATTR_CONTROL | BG_ATTR_USER_DEFINED | BG_ATTR_UNKNOWN))
            order[v->n_specials++] = (by_length){(uint32_t)(v->text.span[i] & 0xFFFFFF), i};
    /* Longest first, as llama.cpp's cache_special_tokens (which leaves ties
     * in no set order; here by id). */
    qsort(order, v->n_specials, sizeof *order, cmp_length);
    for (uint32_t i = 0; i < v->n_specials; i++)
        v->specials[i] = order[i].id;
    free(order);

    size_t total = 1;
    for (uint32_t s = 0; s < v->n_specials; s++)
        total += v->text.span[v->specials[s]] & 0xFFFFFF;
    v->trie = calloc(total, sizeof *v->trie);
    if (!v->trie)
        return nomem(err);
    v->n_nodes = 1;
    v->trie[0].special = -1;
    for (uint32_t s = 0; s < v->n_specials; s++) {
        size_t len;
        const uint8_t *t = bg_strset_str(&v->text, (uint32_t)v->specials[s], &len);
        uint32_t node = 0;
        for (size_t k = 0; k < len; k++) {
            uint32_t c = node == 0 ? v->root_child[t[k]] : v->trie[node].child;
            if (node != 0)
                while (c && v->trie[c].byte != t[k])
                    c = v->trie[c].sibling;
            if (!c) {
                c = v->n_nodes++;
                v->trie[c] = (bg_trie_node){0, 0, -1, t[k]};
                if (node == 0) {
                    v->root_child[t[k]] = c;
                } else {
                    v->trie[c].sibling = v->trie[node].child;
                    v->trie[node].child = c;
                }
            }
            node = c;
        }
        v->trie[node].special = (int32_t)s;
    }
    return BRIGADE_OK;
}

static brigade_status build_pieces(brigade_vocab *v, brigade_error *err)
{
    size_t len = 0, cap = 0;
    bool oom = false;
    v->piece_span = malloc((size_t)v->n_tokens * sizeof *v->piece_span);
    if (!v->piece_span)
        return nomem(err);
    for (int32_t i = 0; i < v->n_tokens && !oom; i++) {
        size_t start = len;
        make_piece(v, i, &v->pieces, &len, &cap, &oom);
        v->piece_span[i] = (uint64_t)start << 24 | (len - start);
        if (len > PIECES_MAX_BYTES)
            return bg_fail(err, BRIGADE_ERR_FORMAT,
                           "%s: the tokens' texts decode to more than %u MiB", KEY_TOK_TOKENS,
                           PIECES_MAX_BYTES >> 20);
    }
    if (oom)
        return nomem(err);
    return BRIGADE_OK;
}

brigade_status brigade_vocab_load(const brigade_gguf *file, brigade_vocab **out, brigade_error *err)
{
    *out = NULL;
    brigade_string model = {NULL, 0}, pre = {NULL, 0};
    brigade_status st = brigade_gguf_get_str(file, KEY_TOK_MODEL, false, &model, err);
    if (st)
        return st;
    if (!model.ptr)
        return bg_fail(err, BRIGADE_ERR_FORMAT, "the model has no tokenizer (no %s)",
                       KEY_TOK_MODEL);
    if (strcmp(model.ptr, "gpt2") != 0)
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "%s '%s' is not supported: brigade reads byte-level BPE ('gpt2') only",
                       KEY_TOK_MODEL, model.ptr);
    st = brigade_gguf_get_str(file, KEY_TOK_PRE, false, &pre, err);
    if (st)
        return st;
    if (!pre.ptr)
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "%s is missing: brigade needs one of " SUPPORTED_PRE, KEY_TOK_PRE);
    size_t p = 0, n_pre = sizeof pre_tokenizers / sizeof *pre_tokenizers;
    while (p < n_pre && strcmp(pre.ptr, pre_tokenizers[p].name) != 0)
        p++;
    if (p == n_pre)
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "%s '%.64s' is not supported (supported: " SUPPORTED_PRE ")", KEY_TOK_PRE,
                       pre.ptr);

    brigade_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return nomem(err);
    snprintf(v->pre, sizeof v->pre, "%s", pre_tokenizers[p].name);
    v->ignore_merges = pre_tokenizers[p].ignore_merges;
    v->ids.add_bos = pre_tokenizers[p].add_bos;
    st = load_tokens(v, file, err);
    if (!st)
        st = load_merges(v, file, err);

    int32_t eom = -1, fim[6] = {-1, -1, -1, -1, -1, -1};
    static const char *const fim_keys[6][2] = {
        {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
        {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
        {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
        {"tokenizer.ggml.fim_pad_token_id", NULL},
        {"tokenizer.ggml.fim_rep_token_id", NULL},
        {"tokenizer.ggml.fim_sep_token_id", NULL},
    };
    v->ids.bos = v->ids.eos = v->ids.eot = v->ids.pad = v->ids.unk = -1;
    if (!st)
        st = get_id(file, KEY_TOK_BOS, v->n_tokens, true, &v->ids.bos, err);
    if (!st)
        st = get_id(file, KEY_TOK_EOS, v->n_tokens, true, &v->ids.eos, err);
    if (!st)
        st = get_id(file, KEY_TOK_EOT, v->n_tokens, true, &v->ids.eot, err);
    if (!st)
        st = get_id(file, KEY_TOK_PAD, v->n_tokens, true, &v->ids.pad, err);
    if (!st)
        st = get_id(file, KEY_TOK_UNK, v->n_tokens, true, &v->ids.unk, err);
    if (!st)
        st = get_id(file, "tokenizer.ggml.eom_token_id", v->n_tokens, false, &eom, err);
    for (int i = 0; i < 6 && !st; i++)
        for (int k = 0; k < 2 && !st && fim_keys[i][k]; k++) {
            int32_t id = -1;
            st = get_id(file, fim_keys[i][k], v->n_tokens, false, &id, err);
            if (id >= 0)
                fim[i] = id;
        }
    if (!st)
        st = get_bool(file, KEY_TOK_ADD_BOS, &v->ids.add_bos, err);
    if (!st)
        st = get_bool(file, KEY_TOK_ADD_EOS, &v->ids.add_eos, err);
    if (!st) {
        /* llama.cpp would fall back to token 11; brigade adds nothing. */
        v->ids.add_bos = v->ids.add_bos && v->ids.bos >= 0;
        v->ids.add_eos = v->ids.add_eos && v->ids.eos >= 0;
        apply_overrides(v, eom, fim);
        st = build_specials(v, err);
    }
    if (!st)
        st = build_pieces(v, err);
    if (!st)
        st = bg_pretok_create(pre_tokenizers[p].kind, &v->pretok, err);
    if (st) {
        brigade_vocab_free(v);
        return st;
    }
    *out = v;
    return BRIGADE_OK;
}

void brigade_vocab_free(brigade_vocab *v)
{
    if (!v)
        return;
    strset_free(&v->text);
    strset_free(&v->strings);
    free(v->attr);
    free(v->pieces);
    free(v->piece_span);
    free(v->string_token);
    free(v->merges);
    free(v->specials);
    free(v->trie);
    bg_pretok_free(v->pretok);
    free(v);
}
