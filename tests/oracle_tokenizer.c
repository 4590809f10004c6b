/* The tokenizer against llama.cpp, for the four vocabularies brigade reads
 * (qwen35, qwen2, llama-bpe, gpt-2):
 *   - every fixture input (.inp/.out, read as llama.cpp's test-tokenizer-0
 *     reads them, add_special and parse_special off) gives the expected ids;
 *   - 10,000 generated strings per vocabulary (mixed scripts, emoji, marks,
 *     digits, whitespace, code, contractions, malformed UTF-8, special-token
 *     text), each tokenized with all four add_special/parse_special
 *     combinations, give llama_tokenize's ids; so does a sweep over every
 *     code point in letter/digit/space contexts;
 *   - well-formed text survives tokenize -> streaming detokenizer, and the
 *     detokenizer never hands out part of a character;
 *   - every token's piece (with and without special) equals
 *     llama_token_to_piece's, and kinds, end-of-generation, bos/eos and
 *     add_bos/add_eos agree;
 *   - the letter, digit, mark and space classes of the pre-tokenizer agree
 *     with llama.cpp's Unicode table for every code point;
 *   - a small hand-made vocabulary with odd merges (parts that are not
 *     tokens, results that are not tokens, parts that are not GPT-2 text)
 *     and an empty token tokenizes as in llama.cpp;
 *   - malformed tokenizer metadata is refused with a message naming it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "oracle.h"
#include "ggml-backend.h"
#include "gguf_writer.h"
#include "llama.h"
#include "tokenizer.h"

#define N_GENERATED 10000

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ byte buffers */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(sbuf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_cp(sbuf *b, uint32_t cp)
{
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (uint8_t)(0xC0 | cp >> 6);
        u[1] = (uint8_t)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | cp >> 12);
        u[1] = (uint8_t)(0x80 | ((cp >> 6) & 63));
        u[2] = (uint8_t)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | cp >> 18);
        u[1] = (uint8_t)(0x80 | ((cp >> 12) & 63));
        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 63));
        u[3] = (uint8_t)(0x80 | (cp & 63));
        n = 4;
    }
    put(b, u, n);
}

/* Whether s[0..n) is well-formed UTF-8 throughout. */
static bool utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        if (k == 0 || n - i < k)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) ||
            (c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += k;
    }
    return true;
}

static void print_escaped(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c >= 0x20 && c < 0x7F)
            fputc(c, f);
        else
            fprintf(f, "\\x%02x", c);
    }
    fputc('"', f);
}

static void print_ids(FILE *f, const char *label, const int32_t *ids, size_t n)
{
    fprintf(f, "  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 80; i++)
        fprintf(f, " %d", (int)ids[i]);
    fprintf(f, n > 80 ? " ...\n" : "\n");
}

/* --------------------------------------------------------- both tokenizers */

typedef struct pair_of {
    const char *name;
    brigade_gguf *file;
    brigade_vocab *mine;
    struct llama_model *model;
    const struct llama_vocab *theirs;
    int32_t *a, *b; /* id buffers */
    size_t cap;
    unsigned printed;
} pair_of;

static void ensure(pair_of *v, size_t len)
{
    size_t need = 3 * len + 16;
    if (need > v->cap) {
        v->a = realloc(v->a, need * sizeof *v->a);
        v->b = realloc(v->b, need * sizeof *v->b);
        v->cap = need;
    }
}

/* Tokenizes with both; true when the ids agree (mismatches are printed,
 * the first few of each vocabulary). */
static bool same_ids(pair_of *v, const char *text, size_t len, bool add_special,
                     bool parse_special)
{
    ensure(v, len);
    size_t n = 0;
    brigade_error err;
    brigade_status st = brigade_tokenize(v->mine, text, len, add_special, parse_special, v->a,
                                         v->cap, &n, &err);
    int32_t m = llama_tokenize(v->theirs, text, (int32_t)len, v->b, (int32_t)v->cap, add_special,
                               parse_special);
    bool same = st == BRIGADE_OK && m >= 0 && (size_t)m == n &&
                memcmp(v->a, v->b, n * sizeof *v->a) == 0;
    if (!same && v->printed++ < 5) {
        fprintf(stderr, "%s: add_special=%d parse_special=%d input ", v->name, add_special,
                parse_special);
        print_escaped(stderr, text, len);
        fputc('\n', stderr);
        if (st)
            fprintf(stderr, "  brigade error: %s\n", err.message);
        print_ids(stderr, "brigade  ", v->a, n);
        print_ids(stderr, "llama.cpp", v->b, m < 0 ? 0 : (size_t)m);
    }
    return same;
}

static bool open_pair(pair_of *v, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf", ORACLE_SRC_DIR, name);
    memset(v, 0, sizeof *v);
    v->name = name;
    brigade_error err;
    if (brigade_gguf_open(path, NULL, &v->file, &err) ||
        brigade_vocab_load(v->file, &v->mine, &err)) {
        CHECK(false, "%s: brigade cannot load the vocabulary: %s", name, err.message);
        return false;
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    v->model = llama_model_load_from_file(path, mp);
    CHECK(v->model != NULL, "%s: llama.cpp cannot load %s", name, path);
    if (!v->model)
        return false;
    v->theirs = llama_model_get_vocab(v->model);
    return true;
}

static void close_pair(pair_of *v)
{
    brigade_vocab_free(v->mine);
    brigade_gguf_close(v->file);
    if (v->model)
        llama_model_free(v->model);
    free(v->a);
    free(v->b);
}

/* ---------------------------------------------------------------- fixtures */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    sbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(&b, chunk, n);
    fclose(f);
    if (!b.p)
        put(&b, "", 0);
    *len = b.n;
    return b.p;
}

/* Inputs are separated by "\n__ggml_vocab_test__\n"; expected ids are one
 * line per input, space-separated. */
static void check_fixtures(pair_of *v)
{
    char path[512];
    size_t in_len, out_len;
    snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf.inp", ORACLE_SRC_DIR, v->name);
    char *inp = read_file(path, &in_len);
    snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf.out", ORACLE_SRC_DIR, v->name);
    char *out = read_file(path, &out_len);
    CHECK(inp && out, "%s: cannot read the fixture files", v->name);
    if (!inp || !out)
        return;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t pos = 0, line = 0, n_tests = 0, failed = 0;
    char *lp = out, *out_end = out + out_len;
    while (pos < in_len) {
        char *next = strstr(inp + pos, sep);
        size_t len = next ? (size_t)(next - (inp + pos)) : in_len - pos;
        const char *text = inp + pos;
        pos = next ? pos + len + sizeof sep - 1 : in_len;

        /* the expected line */
        CHECK(lp < out_end, "%s: fewer output lines than inputs", v->name);
        if (lp >= out_end)
            break;
        char *eol = memchr(lp, '\n', (size_t)(out_end - lp));
        if (!eol)
            eol = out_end;
        int32_t expected[4096];
        size_t n_expected = 0;
        for (char *p = lp; p < eol;) {
            while (p < eol && (*p == ' ' || *p == '\r'))
                p++;
            if (p >= eol)
                break;
            expected[n_expected++] = (int32_t)strtol(p, &p, 10);
        }
        lp = eol + 1;
        line++;

        pair_of *pv = v;
        ensure(pv, len);
        size_t n = 0;
        brigade_error err;
        brigade_status st = brigade_tokenize(v->mine, text, len, false, false, v->a, v->cap, &n,
                                             &err);
        bool ok = st == BRIGADE_OK && n == n_expected &&
                  memcmp(v->a, expected, n * sizeof *expected) == 0;
        n_tests++;
        failed += !ok;
        CHECK(ok, "%s: fixture %zu differs", v->name, line);
        if (!ok) {
            fprintf(stderr, "  input ");
            print_escaped(stderr, text, len);
            fputc('\n', stderr);
            print_ids(stderr, "brigade ", v->a, n);
            print_ids(stderr, "expected", expected, n_expected);
        }
    }
    printf("%-9s fixtures: %zu inputs, %zu mismatches\n", v->name, n_tests, failed);
    free(inp);
    free(out);
}

/* --------------------------------------------------------------- generator */

static uint64_t rng;

static uint64_t next_random(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t below(uint32_t n)
{
    return (uint32_t)(next_random() % n);
}

static uint32_t in_range(uint32_t lo, uint32_t hi)
{
    return lo + below(hi - lo + 1);
}

static const char *pick(const char *const *list, size_t n)
{
    return list[below((uint32_t)n)];
}
#define PICK(list) pick(list, sizeof list / sizeof *list)

static const char *const code_snippets[] = {
    "for (int i = 0; i < n; i++) {", "x->y", "a::b", "#include <stdio.h>", "// comment",
    "/* block */", "if (a == b && c != d) return;", "def f(x):\n    return x**2",
    "  }\n}\n", "arr[i][j] += 1;", "printf(\"%d\\n\", x);", "{\"key\": [1, 2.5e-3, null]}",
    "SELECT * FROM t WHERE id=42;", "$ ls -la | grep .c", "<div class=\"x\">", "</div>",
    "=>", "!==", "...", "?!", "--", "__init__", "0x1F", "1.0e10", "a_b_c", "@@ -1,3 +1,4 @@",
    "\t\treturn nullptr;", "std::vector<int>", "~/.config", "C:\\Windows\\", "$$x^2$$",
};
static const char *const contractions[] = {
    "'s", "'S", "'re", "'Re", "'RE", "'rE", "'ve", "'VE", "'ll", "'LL", "'lL", "'d", "'D",
    "'m", "'M", "'t", "'T", "don't", "I'M", "y'all", "it's", "THEY'RE", "we'Ve",
    "\xe2\x80\x99s", "' s", "''", "'", "'x", "''s", "'sa", "'ll've",
};
static const char *const specials[] = {
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
    "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "[PAD151650]", "[PAD151700]",
    "[PAD151935]", "<|reserved_special_token_5|>", "<|im_st", "<|", "|>", "<|endoftext|",
    "<<|im_end|>>", "<|im_end|><|im_end|>", "<|im_start|>user\n", " <|im_end|> ",
    "\n<|endoftext|>\n", "[PAD151650][PAD151651]", "<|endoftext|>[PAD151646]",
};
static const uint32_t odd_spaces[] = {0x00A0, 0x3000, 0x2009, 0x0085, 0x180E, 0x200B,
                                      0x2028, 0x1680, 0x202F, 0xFEFF, 0x000B, 0x000C};
/* Code points whose class changed in Unicode 15.0/15.1 (see pretokenize.c) */
static const uint32_t new_cps[][2] = {
    {0x31350, 0x323AF}, {0x2EBF0, 0x2EE5D}, {0x11F00, 0x11F59}, {0x1E4D0, 0x1E4F9},
    {0x1D2C0, 0x1D2D3}, {0x13430, 0x13455}, {0x1E030, 0x1E08F}, {0x0CF3, 0x0CF3},
    {0x0ECE, 0x0ECE}, {0x10EFD, 0x10EFF}, {0x1123F, 0x11241}, {0x1DF25, 0x1DF2A},
};

static void gen_piece(sbuf *b, bool *malformed)
{
    switch (below(20)) {
    case 0: /* latin word, sometimes accented */
    case 1: {
        uint32_t n = in_range(1, 12);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t r = below(20);
            if (r < 12)
                put_cp(b, in_range('a', 'z'));
            else if (r < 16)
                put_cp(b, in_range('A', 'Z'));
            else if (r < 19)
                put_cp(b, in_range(0xC0, 0x17F));
            else
                put_cp(b, 0xDF);
        }
        break;
    }
    case 2: /* spaces */
        put(b, "    ", in_range(1, 4));
        break;
    case 3: { /* CJK, kana, hangul */
        uint32_t n = in_range(1, 10), kind = below(4);
        for (uint32_t i = 0; i < n; i++)
            put_cp(b, kind == 0   ? in_range(0x3041, 0x3096)
                      : kind == 1 ? in_range(0xAC00, 0xD7A3)
                      : kind == 2 ? in_range(0x30A1, 0x30FA)
                                  : in_range(0x4E00, 0x9FA5));
        break;
    }
    case 4: { /* cyrillic, arabic with marks, devanagari with signs */
        uint32_t n = in_range(1, 9), kind = below(3);
        for (uint32_t i = 0; i < n; i++) {
            if (kind == 0)
                put_cp(b, in_range(0x410, 0x44F));
            else if (kind == 1)
                put_cp(b, below(4) ? in_range(0x621, 0x64A) : in_range(0x64B, 0x652));
            else
                put_cp(b, below(3) ? in_range(0x915, 0x939) : in_range(0x93E, 0x94D));
        }
        break;
    }
    case 5: { /* emoji: single, with selector or skin tone, ZWJ family, flags */
        uint32_t kind = below(5);
        if (kind == 0) {
            put_cp(b, in_range(0x1F600, 0x1F64F));
        } else if (kind == 1) {
            put_cp(b, in_range(0x1F300, 0x1F5FF));
            put_cp(b, below(2) ? 0xFE0F : in_range(0x1F3FB, 0x1F3FF));
        } else if (kind == 2) {
            uint32_t n = in_range(2, 4);
            for (uint32_t i = 0; i < n; i++) {
                if (i)
                    put_cp(b, 0x200D);
                put_cp(b, in_range(0x1F466, 0x1F469));
            }
        } else if (kind == 3) {
            put_cp(b, in_range(0x1F1E6, 0x1F1FF));
            put_cp(b, in_range(0x1F1E6, 0x1F1FF));
        } else {
            put_cp(b, in_range(0x2600, 0x27BF));
            put_cp(b, 0xFE0F);
        }
        break;
    }
    case 6: { /* combining marks after a letter, a space or nothing */
        uint32_t r = below(3);
        if (r == 0)
            put_cp(b, in_range('a', 'z'));
        else if (r == 1)
            put(b, " ", 1);
        uint32_t n = in_range(1, 3);
        for (uint32_t i = 0; i < n; i++)
            put_cp(b, in_range(0x300, 0x36F));
        break;
    }
    case 7: { /* digits: ASCII runs and other scripts */
        uint32_t n = in_range(1, 15), kind = below(5);
        for (uint32_t i = 0; i < n; i++)
            put_cp(b, kind == 0   ? in_range(0x660, 0x669)
                      : kind == 1 ? in_range(0x966, 0x96F)
                      : kind == 2 ? in_range(0xFF10, 0xFF19)
                                  : in_range('0', '9'));
        if (below(5) == 0)
            put_cp(b, below(2) ? 0xB2 : 0x2153); /* superscript two, one third */
        break;
    }
    case 8: { /* whitespace runs */
        uint32_t n = in_range(1, 8);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t r = below(10);
            if (r < 4)
                put(b, " ", 1);
            else if (r == 4)
                put(b, "\t", 1);
            else if (r == 5)
                put(b, "\n", 1);
            else if (r == 6)
                put(b, "\r\n", 2);
            else if (r == 7)
                put(b, "\r", 1);
            else
                put_cp(b, odd_spaces[below(sizeof odd_spaces / sizeof *odd_spaces)]);
        }
        break;
    }
    case 9: /* code */
        puts_(b, PICK(code_snippets));
        break;
    case 10: { /* punctuation */
        static const char punct[] = "{}();=<>[]!?.,:;\"'`~@#$%^&*-_+|\\/";
        uint32_t n = in_range(1, 5);
        for (uint32_t i = 0; i < n; i++)
            put(b, &punct[below(sizeof punct - 1)], 1);
        break;
    }
    case 11:
        puts_(b, PICK(contractions));
        break;
    case 12: { /* malformed UTF-8 */
        *malformed = true;
        static const char *const bad[] = {
            "\x80", "\xbf", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
            "\xe4\xb8", "\xf0\x9f\x98", "\xc3", "\xf8\x88\x80\x80\x80", "\xfe", "\xff",
            "\xc1\xbf", "\xf0\x80\x80\x80", "\xe2\x28\xa1", "\xf4\x8f\xbf",
        };
        if (below(2)) {
            puts_(b, PICK(bad));
        } else {
            uint32_t n = in_range(1, 4);
            for (uint32_t i = 0; i < n; i++) {
                char c = (char)in_range(0x80, 0xFF);
                put(b, &c, 1);
            }
        }
        break;
    }
    case 13:
        puts_(b, PICK(specials));
        break;
    case 14: /* any code point (well-formed) */
        for (uint32_t i = in_range(1, 3); i > 0; i--) {
            uint32_t cp;
            do
                cp = below(4) ? in_range(0x80, 0x2FFFF) : in_range(0x80, 0x10FFFF);
            while (cp >= 0xD800 && cp <= 0xDFFF);
            put_cp(b, cp);
        }
        break;
    case 15: { /* code points new in Unicode 15.x, around letters and digits */
        const uint32_t *r = new_cps[below(sizeof new_cps / sizeof *new_cps)];
        if (below(2))
            put(b, below(2) ? "a" : " ", 1);
        for (uint32_t i = in_range(1, 3); i > 0; i--)
            put_cp(b, in_range(r[0], r[1]));
        if (below(2))
            put(b, below(2) ? "1" : "x", 1);
        break;
    }
    case 16: { /* ASCII control characters */
        char c = (char)(below(3) ? in_range(0, 31) : 127);
        put(b, &c, 1);
        break;
    }
    case 17: { /* long runs */
        static const char run_of[] = " 7a=-\n\t";
        char c = run_of[below(sizeof run_of - 1)];
        uint32_t n = in_range(10, 60);
        for (uint32_t i = 0; i < n; i++)
            put(b, &c, 1);
        break;
    }
    case 18: /* space + word, the commonest shape */
        put(b, " ", 1);
        for (uint32_t i = in_range(1, 8); i > 0; i--)
            put_cp(b, in_range('a', 'z'));
        break;
    default: /* newlines and indentation */
        puts_(b, below(2) ? "\n    " : " \n  \n");
        break;
    }
}

/* llama.cpp throws (and so aborts) on a four-byte sequence above U+10FFFF;
 * make such a lead byte plainly malformed. */
static void defuse(sbuf *b)
{
    uint8_t *s = (uint8_t *)b->p;
    for (size_t i = 0; i + 3 < b->n; i++)
        if ((s[i] & 0xF8) == 0xF0 && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80 &&
            (((uint32_t)(s[i] & 7) << 18) | ((s[i + 1] & 63u) << 12)) > 0x10FFFF)
            s[i] = 0xFF;
}

static void generate(sbuf *b, bool *malformed)
{
    b->n = 0;
    put(b, "", 0);
    *malformed = false;
    uint32_t pieces = below(30) == 0 ? 0 : in_range(1, 14);
    for (uint32_t i = 0; i < pieces; i++)
        gen_piece(b, malformed);
    defuse(b);
}

/* ------------------------------------------------------------- round trip */

/* tokenize -> streaming detokenizer gives text back; every chunk handed out
 * is whole characters. */
static bool round_trip(pair_of *v, brigade_detok *d, const char *text, size_t len,
                       bool parse_special, sbuf *back)
{
    ensure(v, len);
    size_t n;
    brigade_error err;
    if (brigade_tokenize(v->mine, text, len, false, parse_special, v->a, v->cap, &n, &err))
        return false;
    back->n = 0;
    put(back, "", 0);
    bool whole = true;
    for (size_t i = 0; i < n; i++) {
        const char *chunk;
        size_t k;
        if (brigade_detok_push(d, v->a[i], &chunk, &k, &err))
            return false;
        whole &= utf8_ok((const uint8_t *)chunk, k);
        put(back, chunk, k);
    }
    const char *rest;
    size_t k;
    brigade_detok_flush(d, &rest, &k);
    whole &= k == 0;
    put(back, rest, k);
    return whole && back->n == len && memcmp(back->p, text, len) == 0;
}

static void check_generated(pair_of *v)
{
    rng = 0x5EEDull ^ (uint64_t)strlen(v->name) * 0x1234567ull;
    sbuf s = {0}, back = {0};
    brigade_detok *d;
    brigade_error err;
    CHECK(brigade_detok_create(v->mine, true, &d, &err) == BRIGADE_OK, "%s", err.message);
    size_t mismatches = 0, trips = 0, trip_fail = 0;
    v->printed = 0;
    double t0 = now();
    for (int i = 0; i < N_GENERATED; i++) {
        bool malformed;
        generate(&s, &malformed);
        for (int combo = 0; combo < 4; combo++)
            mismatches += !same_ids(v, s.p, s.n, combo & 1, combo & 2);
        if (!malformed) {
            for (int ps = 0; ps < 2; ps++) {
                trips++;
                if (!round_trip(v, d, s.p, s.n, ps, &back)) {
                    if (trip_fail++ < 3) {
                        fprintf(stderr, "%s: round trip (parse_special=%d) of ", v->name, ps);
                        print_escaped(stderr, s.p, s.n);
                        fprintf(stderr, " gave ");
                        print_escaped(stderr, back.p, back.n);
                        fputc('\n', stderr);
                    }
                    brigade_detok_reset(d);
                }
            }
        }
    }
    CHECK(mismatches == 0, "%s: %zu of %d generated tokenizations differ from llama.cpp",
          v->name, mismatches, 4 * N_GENERATED);
    CHECK(trip_fail == 0, "%s: %zu of %zu round trips failed", v->name, trip_fail, trips);
    printf("%-9s generated: %d strings x 4 modes, %zu mismatches; round trips %zu, %zu failed "
           "(%.1fs)\n",
           v->name, N_GENERATED, mismatches, trips, trip_fail, now() - t0);
    brigade_detok_free(d);
    free(s.p);
    free(back.p);
}

/* The streaming detokenizer on a character split across tokens (" 🦙" is
 * " \xf0\x9f", "\xa6", "\x99" in the qwen vocabularies), on bytes that can
 * never complete, and flushing an unfinished character. */
static void check_detok_stream(pair_of *v)
{
    brigade_detok *d;
    brigade_error err;
    if (brigade_detok_create(v->mine, false, &d, &err)) {
        CHECK(false, "%s: %s", v->name, err.message);
        return;
    }
    int32_t ids[16];
    size_t n;
    const char *text = "x \xf0\x9f\xa6\x99!";
    CHECK(brigade_tokenize(v->mine, text, strlen(text), false, false, ids, 16, &n, &err) == 0,
          "%s", err.message);
    sbuf out = {0};
    put(&out, "", 0);
    size_t emitted_after_each[16] = {0};
    for (size_t i = 0; i < n; i++) {
        const char *chunk;
        size_t k;
        brigade_detok_push(d, ids[i], &chunk, &k, &err);
        CHECK(utf8_ok((const uint8_t *)chunk, k), "%s: a chunk ends inside a character",
              v->name);
        put(&out, chunk, k);
        emitted_after_each[i] = out.n;
    }
    CHECK(out.n == strlen(text) && memcmp(out.p, text, out.n) == 0,
          "%s: streamed text differs", v->name);
    /* the emoji appears all at once: no count between "x " and "x 🦙" */
    bool all_at_once = true;
    for (size_t i = 0; i < n; i++)
        all_at_once &= emitted_after_each[i] <= 2 || emitted_after_each[i] >= 6;
    CHECK(all_at_once && n > 3, "%s: the emoji came out in parts (%zu tokens)", v->name, n);

    /* an unfinished character is held, then flushed */
    int32_t lead = -1;
    for (int32_t id = 0; id < brigade_vocab_n_tokens(v->mine) && lead < 0; id++) {
        brigade_string p = brigade_token_piece(v->mine, id, false);
        if (p.len == 1 && (uint8_t)p.ptr[0] == 0xE4)
            lead = id;
    }
    CHECK(lead >= 0, "%s: no token for byte 0xE4", v->name);
    if (lead >= 0) {
        const char *chunk;
        size_t k;
        brigade_detok_push(d, lead, &chunk, &k, &err);
        CHECK(k == 0, "%s: a lead byte was given out alone", v->name);
        brigade_detok_flush(d, &chunk, &k);
        CHECK(k == 1 && (uint8_t)chunk[0] == 0xE4, "%s: flush did not give the held byte",
              v->name);
        brigade_detok_flush(d, &chunk, &k);
        CHECK(k == 0, "%s: a second flush gave bytes", v->name);
        /* held lead + a letter: both given out, the lead as it is */
        int32_t a = brigade_vocab_find(v->mine, "a", 1);
        brigade_detok_push(d, lead, &chunk, &k, &err);
        brigade_detok_push(d, a, &chunk, &k, &err);
        CHECK(k == 2 && (uint8_t)chunk[0] == 0xE4 && chunk[1] == 'a',
              "%s: a byte that cannot complete was held", v->name);
    }
    CHECK(brigade_detok_push(d, brigade_vocab_n_tokens(v->mine), &text, &n, &err) ==
              BRIGADE_ERR_ARG,
          "%s: an id outside the vocabulary was accepted", v->name);
    brigade_detok_free(d);
    free(out.p);
}

/* Every code point of planes 0-3 and 14 (all assigned characters;
 * surrogates aside) between letters, digits, spaces and itself, 64 to a
 * string; the unassigned and private-use planes sampled. (check_classes
 * covers every code point's classes exhaustively.) */
static void check_all_code_points(pair_of *v)
{
    double t0 = now();
    sbuf s = {0};
    size_t mismatches = 0, strings = 0;
    v->printed = 0;
    for (uint32_t start = 0x80; start < 0x110000; start += 64) {
        s.n = 0;
        put(&s, "", 0);
        bool sampled = start >= 0x40000 && (start < 0xE0000 || start >= 0xF0000);
        for (uint32_t cp = start; cp < start + 64 && cp < 0x110000; cp++) {
            if ((cp >= 0xD800 && cp <= 0xDFFF) || (sampled && cp % 61 != 0))
                continue;
            static const char *const before[] = {"a", " ", "1", "'", "", "\n", "!"};
            puts_(&s, before[cp % 7]);
            put_cp(&s, cp);
            put_cp(&s, cp);
            puts_(&s, (cp / 7) % 2 ? "b " : "2 ");
        }
        if (!s.n)
            continue;
        strings++;
        mismatches += !same_ids(v, s.p, s.n, false, false);
    }
    CHECK(mismatches == 0, "%s: %zu of %zu code point sweeps differ", v->name, mismatches,
          strings);
    printf("%-9s code points: %zu strings, %zu mismatches (%.1fs)\n", v->name, strings,
           mismatches, now() - t0);
    free(s.p);
}

/* -------------------------------------------------- pieces, kinds, specials */

static void check_pieces(pair_of *v)
{
    double t0 = now();
    int32_t n = brigade_vocab_n_tokens(v->mine);
    CHECK(n == llama_vocab_n_tokens(v->theirs), "%s: %d tokens, llama.cpp %d", v->name, n,
          llama_vocab_n_tokens(v->theirs));
    size_t bad_piece = 0, bad_kind = 0, bad_eog = 0;
    static char buf[1 << 16];
    for (int32_t id = 0; id < n; id++) {
        for (int special = 0; special < 2; special++) {
            brigade_string mine = brigade_token_piece(v->mine, id, special);
            int32_t k = llama_token_to_piece(v->theirs, id, buf, sizeof buf, 0, special);
            if (k < 0 || (size_t)k != mine.len || memcmp(buf, mine.ptr, mine.len) != 0) {
                if (bad_piece++ < 5) {
                    fprintf(stderr, "%s: piece of %d (special=%d): brigade ", v->name, id,
                            special);
                    print_escaped(stderr, mine.ptr, mine.len);
                    fprintf(stderr, ", llama.cpp ");
                    print_escaped(stderr, buf, k < 0 ? 0 : (size_t)k);
                    fputc('\n', stderr);
                }
            }
        }
        enum llama_token_attr a = llama_vocab_get_attr(v->theirs, id);
        brigade_token_kind kind = brigade_vocab_token_kind(v->mine, id);
        bool ok = (kind == BRIGADE_TOKEN_CONTROL) == ((a & LLAMA_TOKEN_ATTR_CONTROL) != 0) &&
                  (kind == BRIGADE_TOKEN_USER_DEFINED) ==
                      ((a & LLAMA_TOKEN_ATTR_USER_DEFINED) && !(a & LLAMA_TOKEN_ATTR_CONTROL)) &&
                  (kind == BRIGADE_TOKEN_NORMAL) == (a == LLAMA_TOKEN_ATTR_NORMAL);
        if (!ok && bad_kind++ < 5)
            fprintf(stderr, "%s: token %d kind %d, llama.cpp attributes 0x%x\n", v->name, id,
                    kind, (unsigned)a);
        if (brigade_vocab_is_eog(v->mine, id) != llama_vocab_is_eog(v->theirs, id) &&
            bad_eog++ < 5)
            fprintf(stderr, "%s: token %d end-of-generation %d, llama.cpp %d\n", v->name, id,
                    brigade_vocab_is_eog(v->mine, id), llama_vocab_is_eog(v->theirs, id));
    }
    CHECK(bad_piece == 0, "%s: %zu pieces differ", v->name, bad_piece);
    CHECK(bad_kind == 0, "%s: %zu token kinds differ", v->name, bad_kind);
    CHECK(bad_eog == 0, "%s: %zu end-of-generation flags differ", v->name, bad_eog);
    brigade_special_tokens sp = brigade_vocab_specials(v->mine);
    CHECK(sp.bos == llama_vocab_bos(v->theirs), "%s: bos %d, llama.cpp %d", v->name, sp.bos,
          llama_vocab_bos(v->theirs));
    CHECK(sp.eos == llama_vocab_eos(v->theirs), "%s: eos %d, llama.cpp %d", v->name, sp.eos,
          llama_vocab_eos(v->theirs));
    CHECK(sp.pad == llama_vocab_pad(v->theirs), "%s: pad %d, llama.cpp %d", v->name, sp.pad,
          llama_vocab_pad(v->theirs));
    CHECK(sp.add_bos == llama_vocab_get_add_bos(v->theirs), "%s: add_bos differs", v->name);
    CHECK(sp.add_eos == llama_vocab_get_add_eos(v->theirs), "%s: add_eos differs", v->name);
    CHECK(sp.eot < 0 || llama_vocab_is_eog(v->theirs, sp.eot), "%s: eot %d does not end "
          "generation in llama.cpp", v->name, sp.eot);
    printf("%-9s pieces: %d tokens x 2, %zu mismatches; kinds %zu, eog %zu mismatches "
           "(%.1fs)\n",
           v->name, n, bad_piece, bad_kind, bad_eog, now() - t0);
}

/* llama.cpp's own category table (unicode_cpt_flags_from_cpt, an internal
 * C++ function the library exports; its 16-bit flags come back in a
 * register as a uint16_t would). */
static void check_classes(void)
{
    double t0 = now();
    typedef uint16_t (*flags_fn)(uint32_t);
    void *sym = dlsym(RTLD_DEFAULT, "_Z26unicode_cpt_flags_from_cptj");
    /* The pinned oracle exports it; its absence is a broken oracle, not a
     * reason to skip. */
    CHECK(sym != NULL, "classes: llama.cpp does not export unicode_cpt_flags_from_cpt");
    if (!sym)
        return;
    flags_fn flags;
    memcpy(&flags, &sym, sizeof flags);
    enum { N_CPS = 0x110000 };
    uint8_t *mine = malloc(N_CPS);
    bool ok = mine && bg_pretok_classify(0, N_CPS, mine);
    CHECK(ok, "the pre-tokenizer classes cannot be computed");
    size_t bad = 0;
    for (uint32_t cp = 0; ok && cp < N_CPS; cp++) {
        uint16_t f = flags(cp >= 0xD800 && cp <= 0xDFFF ? 0xE000 : cp);
        uint8_t theirs = (uint8_t)(((f & 0x0004) ? BG_CLASS_L : 0) |
                                   ((f & 0x0002) ? BG_CLASS_N : 0) |
                                   ((f & 0x0010) ? BG_CLASS_M : 0) |
                                   ((f & 0x0100) ? BG_CLASS_WS : 0));
        if (mine[cp] != theirs && bad++ < 5)
            fprintf(stderr, "U+%04X: brigade classes 0x%x, llama.cpp 0x%x\n", cp, mine[cp],
                    theirs);
    }
    CHECK(bad == 0, "%zu code points are classed differently from llama.cpp", bad);
    printf("classes: %d code points, %zu differ from llama.cpp (%.1fs)\n", N_CPS, bad,
           now() - t0);
    free(mine);
}

/* ------------------------------------------------- hand-made vocabularies */

typedef struct tiny {
    const char *tokens[300];
    int32_t types[300];
    unsigned n_tokens;
    const char *merges[16];
    unsigned n_merges;
} tiny;

/* GPT-2's encoding of byte b as UTF-8 (as the vocabulary stores it). */
static void byte_text(unsigned b, char out[3])
{
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    unsigned cp = b;
    if (!printable) {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++)
            n += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 63));
        out[2] = 0;
    }
}

/* Writes a vocabulary-only GGUF: the gpt-2 fixture's non-tokenizer keys,
 * then the given tokenizer keys (extra: a callback adding or overriding). */
typedef void (*extra_fn)(bg_gguf_writer *w, void *user);

static bool write_vocab(const char *path, const tiny *t, const char *model, const char *pre,
                        extra_fn extra, void *user)
{
    char src[512];
    snprintf(src, sizeof src, "%s/models/ggml-vocab-gpt-2.gguf", ORACLE_SRC_DIR);
    brigade_gguf *f;
    brigade_error err;
    if (brigade_gguf_open(src, NULL, &f, &err))
        return false;
    bg_gguf_writer *w = bg_gguf_writer_new(0);
    brigade_status st = BRIGADE_OK;
    for (int64_t i = 0; i < brigade_gguf_kv_count(f) && !st; i++) {
        const char *key = brigade_gguf_kv_key(f, i);
        if (strncmp(key, "tokenizer.", 10) != 0 && strcmp(key, "general.alignment") != 0)
            st = bg_gguf_set(w, key, brigade_gguf_kv_value(f, i), &err);
    }
    brigade_gguf_close(f);
    if (t) {
        brigade_string toks[300], mer[16];
        for (unsigned i = 0; i < t->n_tokens; i++)
            toks[i] = (brigade_string){t->tokens[i], strlen(t->tokens[i])};
        for (unsigned i = 0; i < t->n_merges; i++)
            mer[i] = (brigade_string){t->merges[i], strlen(t->merges[i])};
        brigade_value tv = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                            .count = t->n_tokens, .as.strings = toks};
        brigade_value mv = {.type = BRIGADE_VALUE_ARRAY, .elem_type = BRIGADE_VALUE_STRING,
                            .count = t->n_merges, .as.strings = mer};
        if (!st && model)
            st = bg_gguf_set_str(w, "tokenizer.ggml.model", model, &err);
        if (!st && pre)
            st = bg_gguf_set_str(w, "tokenizer.ggml.pre", pre, &err);
        if (!st)
            st = bg_gguf_set(w, "tokenizer.ggml.tokens", &tv, &err);
        if (!st)
            st = bg_gguf_set_array(w, "tokenizer.ggml.token_type", BRIGADE_VALUE_I32, t->types,
                                   t->n_tokens, &err);
        if (!st)
            st = bg_gguf_set(w, "tokenizer.ggml.merges", &mv, &err);
        if (!st)
            st = bg_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", t->n_tokens - 1, &err);
    }
    if (!st && extra)
        extra(w, user);
    if (!st)
        st = bg_gguf_writer_begin(w, path, &err);
    if (!st)
        st = bg_gguf_writer_finish(w, &err);
    bg_gguf_writer_free(w);
    if (st)
        fprintf(stderr, "cannot write %s: %s\n", path, err.message);
    return st == BRIGADE_OK;
}

static char byte_texts[256][3];

static void tiny_base(tiny *t)
{
    memset(t, 0, sizeof *t);
    for (unsigned b = 0; b < 256; b++) {
        byte_text(b, byte_texts[b]);
        t->tokens[t->n_tokens] = byte_texts[b];
        t->types[t->n_tokens++] = 1;
    }
}

/* Odd merges tokenize as llama.cpp tokenizes them. */
static void check_odd_merges(const char *dir)
{
    tiny t;
    tiny_base(&t);
    /* "ab" and "abcd" are tokens, "cd" and "qr" are not; "€ x" has a part
     * outside the byte encoding; "xy z" a part no merge makes; a duplicate
     * merge; an empty token; an out-of-range and an undefined type. */
    const char *more[] = {"ab",     "abcd",   "Ġab",    "",          "zz",
                          "<ctl>",  "<ud>",   "qq",     "<0x41>",    "<0x",
                          "<0x4G>", "<0x-1>", "<unused3>", "<|im_end|>", "a\342\202\254b"};
    int32_t types[] = {1, 1, 1, 1, 9, 3, 4, 0, 6, 6, 6, 6, 3, 1, 1};
    for (unsigned i = 0; i < 15; i++) {
        t.tokens[t.n_tokens] = more[i];
        t.types[t.n_tokens++] = types[i];
    }
    const char *merges[] = {"a b", "c d", "ab cd", "q r", "\xe2\x82\xac x", "xy z", "a b",
                            "Ġ ab", "z z", "q q", "qq r"};
    for (unsigned i = 0; i < 11; i++)
        t.merges[t.n_merges++] = merges[i];
    char path[600];
    snprintf(path, sizeof path, "%s/odd.gguf", dir);
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", NULL, NULL), "cannot write %s", path);

    pair_of v = {.name = "odd"};
    brigade_error err;
    bool ok = brigade_gguf_open(path, NULL, &v.file, &err) == BRIGADE_OK &&
              brigade_vocab_load(v.file, &v.mine, &err) == BRIGADE_OK;
    CHECK(ok, "odd merges: brigade refuses the vocabulary: %s", err.message);
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    v.model = llama_model_load_from_file(path, mp);
    CHECK(v.model != NULL, "odd merges: llama.cpp refuses the vocabulary");
    if (ok && v.model) {
        v.theirs = llama_model_get_vocab(v.model);
        static const char *const inputs[] = {
            "abcd", "abc", "ab cd", "qr", "qrs abcdqr", " ab", "xyz", "\342\202\254x",
            "zz", "zzz", "qqr", "qqqr", "<ctl><ud>", "[EMPTY_259]", "a<ud>b", "aaaa bbbb",
            "\377\376 abcd \300\200", "\355\240\200ab", "<0x41><|im_end|><unused3>",
        };
        size_t bad = 0;
        for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++)
            for (int combo = 0; combo < 4; combo++)
                bad += !same_ids(&v, inputs[i], strlen(inputs[i]), combo & 1, combo & 2);
        CHECK(bad == 0, "odd merges: %zu tokenizations differ from llama.cpp", bad);
        size_t bad_piece = 0;
        char buf[256];
        for (int32_t id = 0; id < brigade_vocab_n_tokens(v.mine); id++)
            for (int special = 0; special < 2; special++) {
                brigade_string p = brigade_token_piece(v.mine, id, special);
                int32_t k = llama_token_to_piece(v.theirs, id, buf, sizeof buf, 0, special);
                bad_piece += k < 0 || (size_t)k != p.len || memcmp(buf, p.ptr, p.len) != 0;
            }
        CHECK(bad_piece == 0, "odd merges: %zu pieces differ from llama.cpp", bad_piece);
        printf("odd vocabulary: %zu tokenizations, %zu pieces differ\n", bad, bad_piece);
    }
    close_pair(&v);
    remove(path);
}

typedef struct override {
    const char *key;
    int kind; /* 0: u32, 1: bool, 2: array of i32 (count in u32), 3: string */
    uint32_t u32;
    const char *str;
} override;

static void apply_override(bg_gguf_writer *w, void *user)
{
    const override *o = user;
    brigade_error err;
    if (o->kind == 0)
        bg_gguf_set_u32(w, o->key, o->u32, &err);
    else if (o->kind == 1)
        bg_gguf_set_bool(w, o->key, o->u32 != 0, &err);
    else if (o->kind == 2) {
        int32_t *a = calloc(o->u32 + 1, sizeof *a);
        bg_gguf_set_array(w, o->key, BRIGADE_VALUE_I32, a, o->u32, &err);
        free(a);
    } else
        bg_gguf_set_str(w, o->key, o->str, &err);
}

/* Opens and loads path; true when that fails with status and a message
 * containing both words. (The GGUF reader itself checks the types of the
 * keys it knows, so some files are refused before the tokenizer sees them.) */
static bool refused(const char *path, brigade_status status, const char *w1, const char *w2)
{
    brigade_gguf *f;
    brigade_vocab *v = NULL;
    brigade_error err = {0};
    brigade_status st = brigade_gguf_open(path, NULL, &f, &err);
    if (!st) {
        st = brigade_vocab_load(f, &v, &err);
        brigade_vocab_free(v);
        brigade_gguf_close(f);
    }
    bool ok = st == status && strstr(err.message, w1) && (!w2 || strstr(err.message, w2));
    if (!ok)
        fprintf(stderr, "  got status %d: %s\n", (int)st, st ? err.message : "(loaded)");
    return ok;
}

static void check_refusals(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    tiny t;

    CHECK(write_vocab(path, NULL, NULL, NULL, NULL, NULL) &&
              refused(path, BRIGADE_ERR_FORMAT, "no tokenizer", "tokenizer.ggml.model"),
          "a file without a tokenizer");
    tiny_base(&t);
    CHECK(write_vocab(path, &t, "llama", "qwen2", NULL, NULL) &&
              refused(path, BRIGADE_ERR_UNSUPPORTED, "'llama'", "gpt2"),
          "an SPM tokenizer");
    CHECK(write_vocab(path, &t, "gpt2", NULL, NULL, NULL) &&
              refused(path, BRIGADE_ERR_UNSUPPORTED, "tokenizer.ggml.pre", "qwen35"),
          "a missing pre-tokenizer");
    CHECK(write_vocab(path, &t, "gpt2", "deepseek-coder", NULL, NULL) &&
              refused(path, BRIGADE_ERR_UNSUPPORTED, "'deepseek-coder'", "llama-bpe"),
          "an unknown pre-tokenizer");
    t.merges[t.n_merges++] = "a b";
    t.merges[t.n_merges++] = "ab";
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", NULL, NULL) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.merges[1]", "'ab'"),
          "a merge without a space");
    tiny_base(&t);
    t.tokens[t.n_tokens] = "a";
    t.types[t.n_tokens++] = 1;
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", NULL, NULL) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.tokens[256]", "repeats"),
          "a repeated token");
    tiny_base(&t);
    override o = {"tokenizer.ggml.bos_token_id", 0, 300, NULL};
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", apply_override, &o) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.bos_token_id = 300", "256"),
          "a bos id outside the vocabulary");
    o = (override){"tokenizer.ggml.token_type", 2, 100, NULL};
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", apply_override, &o) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.token_type", "100 entries"),
          "a token type array of the wrong length");
    o = (override){"tokenizer.ggml.tokens", 2, 256, NULL};
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", apply_override, &o) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.tokens", "array of strings"),
          "tokens that are not strings");
    o = (override){"tokenizer.ggml.add_bos_token", 0, 1, NULL};
    CHECK(write_vocab(path, &t, "gpt2", "qwen2", apply_override, &o) &&
              refused(path, BRIGADE_ERR_FORMAT, "tokenizer.ggml.add_bos_token", "bool"),
          "add_bos_token that is not a bool");
    remove(path);
}

int main(void)
{
    double t0 = now();
    oracle_init();

    static const char *const names[] = {"qwen35", "qwen2", "llama-bpe", "gpt-2"};
    for (size_t i = 0; i < 4; i++) {
        pair_of v;
        double t0 = now();
        bool opened = open_pair(&v, names[i]);
        printf("%-9s loaded by both (%.1fs)\n", names[i], now() - t0);
        if (opened) {
            check_fixtures(&v);
            check_pieces(&v);
            check_detok_stream(&v);
            CHECK(strcmp(brigade_vocab_pre(v.mine), names[i]) == 0, "%s: pre-tokenizer %s",
                  names[i], brigade_vocab_pre(v.mine));
            brigade_string t = brigade_vocab_token_text(v.mine, 220);
            CHECK(t.len == 2 && memcmp(t.ptr, "\xc4\xa0", 2) == 0 &&
                      brigade_vocab_find(v.mine, t.ptr, t.len) == 220,
                  "%s: token 220 is not the stored text of a space", names[i]);
            check_generated(&v);
            check_all_code_points(&v);
        }
        close_pair(&v);
    }

    check_classes();
    char dir[] = "/tmp/brigade-oracle-tok-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "cannot make a temporary directory");
    check_odd_merges(dir);
    check_refusals(dir);
    rmdir(dir);

    llama_backend_free();
    printf("oracle_tokenizer: %.1fs\n", now() - t0);
    return check_summary("oracle_tokenizer");
}
