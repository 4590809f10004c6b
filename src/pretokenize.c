/* Pre-tokenization: text -> words, with PCRE2.
 *
 * llama.cpp splits with hand-written scanners (unicode.cpp) that implement
 * the tokenizer.json expressions over its own Unicode 15.1 category table
 * and the White_Space property. Here the same expressions run in PCRE2, with
 * two adjustments so the classes agree with llama.cpp's for every code point:
 *   - \s is spelled out as the White_Space set (PCRE2's \s also takes
 *     U+180E, which llama.cpp does not);
 *   - the letters, digits and marks that Unicode 15.0 and 15.1 added are
 *     appended to \p{L}, \p{N} and \p{M}, for PCRE2 builds whose tables are
 *     older (10.42 has Unicode 14). Appending is harmless when they are not.
 * Where llama.cpp's scanner and the expression could differ (text no
 * alternative matches), llama.cpp makes the unmatched text a word of its
 * own, and so does bg_pretok_split. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer.h"

/* ------------------------------------------------------------------ UTF-8 */

uint32_t bg_utf8_decode(const uint8_t *s, size_t n, size_t *adv)
{
    uint8_t b = s[0];
    *adv = 1;
    if (b < 0x80)
        return b;
    if ((b & 0x40) == 0) /* a continuation byte cannot start a character */
        return 0xFFFD;
    unsigned need;
    uint32_t cp;
    if ((b & 0x20) == 0) {
        need = 2;
        cp = b & 0x1F;
    } else if ((b & 0x10) == 0) {
        need = 3;
        cp = b & 0x0F;
    } else if ((b & 0x08) == 0) {
        need = 4;
        cp = b & 0x07;
    } else {
        return 0xFFFD;
    }
    if (n < need)
        return 0xFFFD;
    for (unsigned i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0xFFFD;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp > 0x10FFFF)
        return 0xFFFD;
    *adv = need;
    return cp;
}

unsigned bg_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

unsigned bg_utf8_seq_len(uint8_t b)
{
    if (b < 0x80)
        return 1;
    if (b < 0xC2)
        return 0;
    if (b < 0xE0)
        return 2;
    if (b < 0xF0)
        return 3;
    if (b < 0xF5)
        return 4;
    return 0;
}

bool bg_utf8_second_byte_ok(uint8_t lead, uint8_t b)
{
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return (b & 0xC0) == 0x80;
    }
}

size_t bg_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII runs eight bytes at a time. */
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        unsigned len = bg_utf8_seq_len(b);
        if (len == 0 || n - i < len || !bg_utf8_second_byte_ok(b, s[i + 1]))
            return i;
        for (unsigned k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return n;
}

/* ------------------------------------------------------------ expressions */

/* White_Space, as llama.cpp's unicode_set_whitespace. */
#define CLASS_WS \
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
    "\\x{205F}\\x{3000}"

/* Letters, digits and marks new in Unicode 15.0 (Khojki, Kawi, Egyptian
 * hieroglyph format controls, Kana Extended-A, Latin Extended-G, Cyrillic
 * Extended-D, Nag Mundari, Kaktovik numerals, CJK Extension B U+2B739 and
 * Extension H, Kannada U+0CF3, Lao U+0ECE, Arabic Extended-C marks) and
 * 15.1 (CJK Extension I). */
#define DELTA_L \
    "\\x{1123F}-\\x{11240}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}" \
    "\\x{13441}-\\x{13446}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}" \
    "\\x{1E4D0}-\\x{1E4EB}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define DELTA_N "\\x{11F50}-\\x{11F59}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}"
#define DELTA_M \
    "\\x{0CF3}\\x{0ECE}\\x{10EFD}-\\x{10EFF}\\x{11241}\\x{11F00}-\\x{11F01}\\x{11F03}" \
    "\\x{11F34}-\\x{11F3A}\\x{11F3E}-\\x{11F42}\\x{13440}\\x{13447}-\\x{13455}\\x{1E08F}" \
    "\\x{1E4EC}-\\x{1E4EF}"

#define CLASS_L "\\p{L}" DELTA_L
#define CLASS_N "\\p{N}" DELTA_N
#define CLASS_M "\\p{M}" DELTA_M

/* The tokenizer.json expressions, (?i:...) spelled out as llama.cpp does
 * and \s, \S, \p{..} replaced by the classes above. */
#define CONTRACTIONS_CI "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]"
#define WS_TAIL "[" CLASS_WS "]*[\\r\\n]+|[" CLASS_WS "]+(?![^" CLASS_WS "])|[" CLASS_WS "]+"

static const char *const expressions[] = {
    [BG_PRETOK_GPT2] =
        "'s|'t|'re|'ve|'m|'ll|'d| ?[" CLASS_L "]+| ?[" CLASS_N "]+| ?[^" CLASS_WS CLASS_L
        CLASS_N "]+|[" CLASS_WS "]+(?![^" CLASS_WS "])",
    [BG_PRETOK_LLAMA3] =
        CONTRACTIONS_CI "|[^\\r\\n" CLASS_L CLASS_N "]?[" CLASS_L "]+|[" CLASS_N
        "]{1,3}| ?[^" CLASS_WS CLASS_L CLASS_N "]+[\\r\\n]*|" WS_TAIL,
    [BG_PRETOK_QWEN2] =
        CONTRACTIONS_CI "|[^\\r\\n" CLASS_L CLASS_N "]?[" CLASS_L "]+|[" CLASS_N "]| ?[^" CLASS_WS
        CLASS_L CLASS_N "]+[\\r\\n]*|" WS_TAIL,
    [BG_PRETOK_QWEN35] =
        CONTRACTIONS_CI "|[^\\r\\n" CLASS_L CLASS_N "]?[" CLASS_L CLASS_M "]+|[" CLASS_N
        "]| ?[^" CLASS_WS CLASS_L CLASS_M CLASS_N "]+[\\r\\n]*|" WS_TAIL,
};

bool bg_pretok_classify(uint32_t first, uint32_t count, uint8_t *classes)
{
    static const char *const classes_re[4] = {"^[" CLASS_L "]$", "^[" CLASS_N "]$",
                                              "^[" CLASS_M "]$", "^[" CLASS_WS "]$"};
    pcre2_code *re[4] = {NULL, NULL, NULL, NULL};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    bool ok = md != NULL;
    for (int k = 0; k < 4 && ok; k++) {
        int code;
        PCRE2_SIZE where;
        re[k] = pcre2_compile((PCRE2_SPTR)classes_re[k], PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP, &code, &where, NULL);
        ok = re[k] != NULL;
    }
    for (uint32_t i = 0; i < count && ok; i++) {
        uint32_t cp = first + i;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xE000;
        uint8_t u[4];
        unsigned n = bg_utf8_encode(cp, u);
        classes[i] = 0;
        for (int k = 0; k < 4; k++) {
            int rc = pcre2_match(re[k], u, n, 0, 0, md, NULL);
            if (rc >= 0)
                classes[i] |= (uint8_t)(1 << k);
            else if (rc != PCRE2_ERROR_NOMATCH)
                ok = false;
        }
    }
    for (int k = 0; k < 4; k++)
        pcre2_code_free(re[k]);
    pcre2_match_data_free(md);
    return ok;
}

struct bg_pretok {
    pcre2_code *code;
    pcre2_match_context *mctx;
    bool jit;
};

brigade_status bg_pretok_create(bg_pretok_kind kind, bg_pretok **out, brigade_error *err)
{
    *out = NULL;
    if ((unsigned)kind >= sizeof expressions / sizeof *expressions)
        return bg_fail(err, BRIGADE_ERR_ARG, "pre-tokenizer kind %d is not known", (int)kind);
    bg_pretok *p = calloc(1, sizeof *p);
    if (!p)
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for the pre-tokenizer");
    int code;
    PCRE2_SIZE where;
    p->code = pcre2_compile((PCRE2_SPTR)expressions[kind], PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP, &code, &where, NULL);
    if (!p->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        free(p);
        return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                       "pre-tokenizer expression does not compile at offset %zu: %s",
                       (size_t)where, (const char *)msg);
    }
    p->jit = pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE) == 0;
    /* Long whitespace runs backtrack once per character; lift the limits
     * that would otherwise fail a multi-megabyte run. */
    p->mctx = pcre2_match_context_create(NULL);
    if (!p->mctx) {
        bg_pretok_free(p);
        return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for the pre-tokenizer");
    }
    pcre2_set_match_limit(p->mctx, UINT32_MAX);
    pcre2_set_depth_limit(p->mctx, UINT32_MAX);
    *out = p;
    return BRIGADE_OK;
}

void bg_pretok_free(bg_pretok *p)
{
    if (!p)
        return;
    pcre2_match_context_free(p->mctx);
    pcre2_code_free(p->code);
    free(p);
}

void bg_pretok_scratch_free(bg_pretok_scratch *s)
{
    pcre2_match_data_free(s->match_data);
    free(s->subject);
    free(s->output);
    memset(s, 0, sizeof *s);
}

/* Rewrites malformed text the way llama.cpp sees it: code points decoded
 * leniently and encoded again. output holds the bytes words are made of;
 * subject is what PCRE2 matches, identical except that surrogates (which
 * PCRE2 rejects) stand as U+E000, a code point of the same class and
 * length. Returns the new length, or SIZE_MAX when out of memory. */
static size_t normalise(bg_pretok_scratch *s, const uint8_t *text, size_t len, bool *surrogates)
{
    if (len > SIZE_MAX / 3)
        return SIZE_MAX;
    size_t need = 3 * len; /* a malformed byte becomes U+FFFD, 3 bytes */
    if (s->cap < need) {
        uint8_t *a = realloc(s->subject, need), *b;
        if (!a)
            return SIZE_MAX;
        s->subject = a;
        b = realloc(s->output, need);
        if (!b)
            return SIZE_MAX;
        s->output = b;
        s->cap = need;
    }
    size_t i = 0, o = 0;
    *surrogates = false;
    while (i < len) {
        size_t ok = bg_utf8_valid_prefix(text + i, len - i);
        memcpy(s->subject + o, text + i, ok);
        memcpy(s->output + o, text + i, ok);
        i += ok;
        o += ok;
        if (i == len)
            break;
        size_t adv;
        uint32_t cp = bg_utf8_decode(text + i, len - i, &adv);
        i += adv;
        unsigned k = bg_utf8_encode(cp, s->output + o);
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            *surrogates = true;
            bg_utf8_encode(0xE000, s->subject + o);
        } else {
            memcpy(s->subject + o, s->output + o, k);
        }
        o += k;
    }
    return o;
}

static int match_at(const bg_pretok *p, pcre2_match_data *md, const uint8_t *subject, size_t n,
                    size_t off)
{
    if (p->jit) {
        int rc = pcre2_jit_match(p->code, subject, n, off, 0, md, p->mctx);
        if (rc != PCRE2_ERROR_JIT_STACKLIMIT)
            return rc;
        /* The interpreter keeps its backtracking state on the heap. */
    }
    return pcre2_match(p->code, subject, n, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, p->mctx);
}

brigade_status bg_pretok_split(const bg_pretok *p, bg_pretok_scratch *s, const uint8_t *text,
                               size_t len, bg_word_fn fn, void *user, brigade_error *err)
{
    if (len == 0)
        return BRIGADE_OK;
    const uint8_t *subject = text, *output = text;
    size_t n = len;
    if (bg_utf8_valid_prefix(text, len) < len) {
        bool surrogates;
        n = normalise(s, text, len, &surrogates);
        if (n == SIZE_MAX)
            return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory normalising %zu bytes of text",
                           len);
        subject = s->subject;
        output = surrogates ? s->output : s->subject;
    }
    if (!s->match_data) {
        s->match_data = pcre2_match_data_create(1, NULL);
        if (!s->match_data)
            return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory for PCRE2 match data");
    }
    pcre2_match_data *md = s->match_data;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t off = 0;
    while (off < n) {
        int rc = match_at(p, md, subject, n, off);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!fn(user, output + off, n - off))
                goto oom;
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return bg_fail(err, BRIGADE_ERR_UNSUPPORTED,
                           "pre-tokenizer failed at byte %zu of %zu: %s", off, n,
                           (const char *)msg);
        }
        size_t a = ov[0], b = ov[1];
        if (a > off && !fn(user, output + off, a - off))
            goto oom;
        if (b == a) {
            /* None of the expressions can match empty; if one ever did,
             * take a character so the loop moves on. */
            size_t adv;
            bg_utf8_decode(subject + a, n - a, &adv);
            b = a + adv;
        }
        if (!fn(user, output + a, b - a))
            goto oom;
        off = b;
    }
    return BRIGADE_OK;
oom:
    return bg_fail(err, BRIGADE_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
}
