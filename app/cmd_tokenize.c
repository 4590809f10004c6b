/* brigade tokenize -m MODEL (-p TEXT | -f FILE) [--special] [--add-special]
 * [--pieces]: the ids a model's tokenizer gives for a text, one per line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade.h"
#include "cli.h"
#include "commands.h"

static void tokenize_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade tokenize -m MODEL.gguf (-p TEXT | -f FILE) [options]\n"
            "  -m, --model FILE   the GGUF file whose tokenizer is used (a model or a\n"
            "                     vocabulary-only file)\n"
            "  -p, --prompt TEXT  the text to tokenize\n"
            "  -f, --file FILE    read the text from FILE ('-': standard input)\n"
            "  --special          turn control tokens written in the text (<|im_start|>)\n"
            "                     into their ids; without it they are plain text\n"
            "  --add-special      add BOS/EOS where the vocabulary asks for them\n"
            "  --pieces           print each id, a tab and the text it stands for\n"
            "                     (control characters and partial UTF-8 escaped)\n");
}

/* Reads a whole file (or standard input) into memory. */
static char *read_all(const char *path, size_t *len)
{
    bool not_opened;
    char *buf = cli_read_file(path, len, &not_opened);
    if (!buf)
        fprintf(stderr, "tokenize: cannot %s '%s': %s\n", not_opened ? "open" : "read", path,
                strerror(errno));
    return buf;
}
/* Well-formed UTF-8 passes through; control characters, backslashes and
 * bytes that do not make a whole character are escaped. */
static void print_piece(const char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        bool whole = k > 0 && n - i >= k;
        for (size_t j = 1; whole && j < k; j++)
            whole = ((unsigned char)p[i + j] & 0xC0) == 0x80;
        if (whole && k > 1) {
            unsigned char c1 = (unsigned char)p[i + 1];
            whole = !((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) ||
                      (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F));
        }
        if (!whole) {
            printf("\\x%02x", c);
            i++;
        } else if (c == '\n') {
            fputs("\\n", stdout);
            i++;
        } else if (c == '\t') {
            fputs("\\t", stdout);
            i++;
        } else if (c == '\r') {
            fputs("\\r", stdout);
            i++;
        } else if (c == '\\') {
            fputs("\\\\", stdout);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            printf("\\x%02x", c);
            i++;
        } else {
            fwrite(p + i, 1, k, stdout);
            i += k;
        }
    }
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool special = false, add_special = false, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            tokenize_usage(stdout);
            return 0;
        }
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc)
            model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc)
            prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(a, "--special"))
            special = true;
        else if (!strcmp(a, "--add-special"))
            add_special = true;
        else if (!strcmp(a, "--pieces"))
            pieces = true;
        else {
            fprintf(stderr, "tokenize: unknown option or missing value: %s\n", a);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || (!prompt == !file)) {
        if (model && prompt && file)
            fprintf(stderr, "tokenize: give the text with -p or -f, not both\n");
        tokenize_usage(stderr);
        return 2;
    }

    size_t len = 0;
    char *text = NULL;
    if (file) {
        text = read_all(file, &len);
        if (!text)
            return 1;
    }
    brigade_gguf *f = NULL;
    brigade_vocab *vocab = NULL;
    brigade_error err = {0};
    int32_t *ids = NULL;
    int rc = 1;
    if (brigade_gguf_open(model, NULL, &f, &err) != BRIGADE_OK) {
        fprintf(stderr, "%s\n", err.message);
        goto done;
    }
    if (brigade_vocab_load(f, &vocab, &err) != BRIGADE_OK) {
        fprintf(stderr, "%s: %s\n", model, err.message);
        goto done;
    }
    const char *src = file ? text : prompt;
    if (!file)
        len = strlen(prompt);
    /* A guess first; the call says how many it needs when that is short. */
    size_t cap = len / 2 + 16, n = 0;
    for (;;) {
        int32_t *bigger = realloc(ids, cap * sizeof *ids);
        if (!bigger) {
            fprintf(stderr, "tokenize: out of memory for %zu ids\n", cap);
            goto done;
        }
        ids = bigger;
        if (brigade_tokenize(vocab, src, len, add_special, special, ids, cap, &n, &err) !=
            BRIGADE_OK) {
            fprintf(stderr, "tokenize: %s\n", err.message);
            goto done;
        }
        if (n <= cap)
            break;
        cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        printf("%d", (int)ids[i]);
        if (pieces) {
            brigade_string piece = brigade_token_piece(vocab, ids[i], true);
            putchar('\t');
            print_piece(piece.ptr, piece.len);
        }
        putchar('\n');
    }
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(ids);
    free(text);
    brigade_vocab_free(vocab);
    brigade_gguf_close(f);
    return rc;
}
