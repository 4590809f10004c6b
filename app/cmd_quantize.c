/* brigade quantize IN.gguf OUT.gguf TYPE [--threads N] [--pure]
 * [--output-type T] [--token-embedding-type T] [--allow-requantize]:
 * llama-quantize's job, with its tensor types and bytes. Ctrl+C stops it and
 * leaves no output file. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void quantize_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade quantize IN.gguf OUT.gguf TYPE [options]\n"
            "  TYPE: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S\n"
            "        Q5_K_M Q6_K F16 BF16 F32\n"
            "  --threads N, -t N           threads (default: every core)\n"
            "  --pure                      every quantizable tensor in TYPE's default type\n"
            "  --output-type T             type of output.weight (e.g. q8_0)\n"
            "  --token-embedding-type T    type of token_embd.weight\n"
            "  --allow-requantize          accept an already quantized input (loses quality)\n");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct progress_state {
    double start, last_draw;
    bool tty;
    int64_t last_tensor;
} progress_state;

/* One line per tensor when stderr is a file; a redrawn line on a terminal. */
static bool on_progress(void *user, const brigade_quantize_progress *p)
{
    progress_state *s = user;
    if (interrupted)
        return false;
    double t = now();
    bool new_tensor = p->tensor != s->last_tensor;
    if (!new_tensor && (!s->tty || t - s->last_draw < 0.2))
        return true;
    if (new_tensor && !s->tty && p->tensor % 16 != 0 && p->tensor + 1 != p->n_tensors)
        return (s->last_tensor = p->tensor), true;
    s->last_tensor = p->tensor;
    s->last_draw = t;
    double el = t - s->start, rate = el > 0 ? p->bytes_done / el : 0;
    double eta = rate > 0 ? (p->bytes_total - p->bytes_done) / rate : 0;
    char done[32], total[32];
    cli_format_bytes(p->bytes_done, done, sizeof done);
    cli_format_bytes(p->bytes_total, total, sizeof total);
    fprintf(stderr, "%s[%4lld/%4lld] %-32.32s %5s -> %-5s %10s / %-10s %6.0f MB/s ETA %3.0fs%s",
            s->tty ? "\r" : "", (long long)p->tensor + 1, (long long)p->n_tensors, p->name,
            brigade_type_name(p->from_type), brigade_type_name(p->to_type), done, total,
            rate / 1e6, eta, s->tty ? "\033[K" : "\n");
    return true;
}

static bool parse_type_flag(const char *flag, const char *text, int32_t *out)
{
    uint32_t t;
    if (!cli_parse_type(text, &t)) {
        fprintf(stderr, "quantize: bad value for %s\n", flag);
        return false;
    }
    *out = (int32_t)t;
    return true;
}

int cmd_quantize(int argc, char **argv)
{
    brigade_quantize_options o = {.output_type = -1, .token_embd_type = -1};
    const char *pos[3] = {0};
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            quantize_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--pure")) {
            o.pure = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            o.allow_requantize = true;
        } else if ((!strcmp(a, "--threads") || !strcmp(a, "-t")) && v) {
            if (!cli_parse_u32(a, argv[++i], &o.n_threads))
                return 2;
        } else if (!strcmp(a, "--output-type") && v) {
            if (!parse_type_flag(a, argv[++i], &o.output_type))
                return 2;
        } else if (!strcmp(a, "--token-embedding-type") && v) {
            if (!parse_type_flag(a, argv[++i], &o.token_embd_type))
                return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "quantize: unknown option or missing value: %s\n", a);
            quantize_usage(stderr);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "quantize: too many arguments ('%s')\n", a);
            return 2;
        }
    }
    if (n_pos != 3) {
        quantize_usage(stderr);
        return 2;
    }
    if (!brigade_ftype_from_name(pos[2], &o.ftype)) {
        fprintf(stderr, "quantize: unknown type '%s'\n", pos[2]);
        quantize_usage(stderr);
        return 2;
    }
    progress_state ps = {.start = now(), .tty = isatty(2), .last_tensor = -1};
    o.progress = on_progress;
    o.progress_user = &ps;
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    brigade_quantize_report rep;
    brigade_error err = {0};
    brigade_status st = brigade_quantize(pos[0], pos[1], &o, &rep, &err);
    if (ps.tty)
        fputc('\n', stderr);
    if (st) {
        fprintf(stderr, "quantize: %s\n", st == BRIGADE_ERR_CANCELLED
                                              ? "interrupted; no output written"
                                              : err.message);
        return st == BRIGADE_ERR_CANCELLED ? 130 : 1;
    }
    double el = now() - ps.start;
    char in[32], out[32];
    cli_format_bytes(rep.bytes_in, in, sizeof in);
    cli_format_bytes(rep.bytes_out, out, sizeof out);
    double n = rep.n_params ? (double)rep.n_params : 1;
    fprintf(stderr,
            "quantize: %s (%s, %.2f bits per weight) -> %s (%s, %.2f bits per weight), "
            "%lld of %lld tensors converted in %.1f s (%.0f MB/s)\n",
            pos[0], in, rep.bytes_in * 8.0 / n, pos[1], out, rep.bytes_out * 8.0 / n,
            (long long)rep.n_quantized, (long long)rep.n_tensors, el,
            el > 0 ? rep.bytes_in / el / 1e6 : 0.0);
    if (rep.n_requantized)
        fprintf(stderr, "quantize: warning: %lld tensors were requantized from a quantized type\n",
                (long long)rep.n_requantized);
    if (rep.n_fallback)
        fprintf(stderr, "quantize: %u tensors took a fallback type (rows not a multiple of the "
                        "block size)\n",
                rep.n_fallback);
    return 0;
}
