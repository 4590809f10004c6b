/* brigade synth's fast path (brigade_synth_options.fast): for every weight
 * type, the file loads and binds, every tensor dequantizes to finite values
 * whose spread matches the slow path's (same distribution), the bytes are
 * reproducible for a seed and differ from the slow path's, and a session
 * evaluates tokens to finite logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brigade.h"
#include "check.h"
#include "quant.h"
#include "types.h"

static char dir[] = "/tmp/brigade_synth_fast_XXXXXX";

static bool synth(const char *path, const char *preset, uint32_t type, bool fast, uint64_t seed)
{
    brigade_synth_options o = {.preset = preset, .type = type, .seed = seed, .fast = fast};
    brigade_error err;
    if (brigade_synth(path, &o, &err)) {
        fprintf(stderr, "synth %s: %s\n", path, err.message);
        return false;
    }
    return true;
}

static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb)
            same = false;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* Root mean square of a tensor's dequantized values; -1 if any is not
 * finite or the tensor cannot be dequantized. */
static double tensor_rms(const brigade_tensor_info *t, float *buf, uint64_t cap)
{
    if (t->n_elements > cap)
        return -1;
    if (t->type == BG_TYPE_F32) {
        memcpy(buf, t->data, t->n_elements * sizeof *buf);
    } else {
        const bg_quant_ops *ops = bg_quant_ops_get((bg_type)t->type);
        if (!ops || !ops->dequantize)
            return -1;
        ops->dequantize(t->data, buf, (int64_t)t->n_elements);
    }
    double sum = 0;
    for (uint64_t i = 0; i < t->n_elements; i++) {
        if (!isfinite(buf[i]))
            return -1;
        sum += (double)buf[i] * buf[i];
    }
    return sqrt(sum / (double)t->n_elements);
}

static void check_type(const char *preset, uint32_t type)
{
    const char *name = brigade_type_name(type);
    char fast[256], fast2[256], slow[256];
    snprintf(fast, sizeof fast, "%s/%s-%s-fast.gguf", dir, preset, name);
    snprintf(fast2, sizeof fast2, "%s/%s-%s-fast2.gguf", dir, preset, name);
    snprintf(slow, sizeof slow, "%s/%s-%s-slow.gguf", dir, preset, name);
    bool made = synth(fast, preset, type, true, 7) && synth(fast2, preset, type, true, 7) &&
                synth(slow, preset, type, false, 7);
    CHECK(made, "%s %s: synth failed", preset, name);
    if (!made)
        return;
    CHECK(same_file(fast, fast2), "%s %s: fast synth not reproducible for a seed", preset, name);
    CHECK(!same_file(fast, slow), "%s %s: fast synth wrote the slow path's bytes", preset, name);

    brigade_error err;
    brigade_gguf *ff = NULL, *fs = NULL;
    CHECK(!brigade_gguf_open(fast, NULL, &ff, &err), "%s", err.message);
    CHECK(!brigade_gguf_open(slow, NULL, &fs, &err), "%s", err.message);
    if (ff && fs) {
        uint64_t cap = 1u << 24;
        float *buf = malloc(cap * sizeof *buf);
        int64_t n = brigade_gguf_tensor_count(ff);
        CHECK(n == brigade_gguf_tensor_count(fs), "%s %s: tensor counts differ", preset, name);
        int bad = 0;
        for (int64_t i = 0; i < n && buf; i++) {
            const brigade_tensor_info *a = brigade_gguf_tensor(ff, i);
            const brigade_tensor_info *b = brigade_gguf_find_tensor(fs, a->name);
            double ra = tensor_rms(a, buf, cap), rb = b ? tensor_rms(b, buf, cap) : -1;
            /* same distribution: the spreads agree within 15% (a pool of
             * a quarter of a small tensor's rows varies a little) */
            bool ok = ra > 0 && rb > 0 && fabs(ra - rb) <= 0.15 * rb;
            if (!ok && bad++ < 3)
                fprintf(stderr, "%s %s: tensor %s rms %g, slow path %g\n", preset, name,
                        a->name, ra, rb);
        }
        CHECK(bad == 0, "%s %s: %d tensors with non-finite or off-scale values", preset, name,
              bad);
        free(buf);
    }
    brigade_gguf_close(ff);
    brigade_gguf_close(fs);

    brigade_model *m = NULL;
    brigade_session *s = NULL;
    CHECK(!brigade_model_load(fast, NULL, &m, &err), "%s %s: load: %s", preset, name,
          err.message);
    brigade_session_options so = {.n_ctx = 64, .n_threads = 2};
    if (m)
        CHECK(!brigade_session_new(m, &so, &s, &err), "%s", err.message);
    if (s) {
        uint32_t nv = brigade_model_n_vocab(m);
        float *logits = malloc(nv * sizeof *logits);
        int32_t toks[6] = {1, 17, 42, 99, 3, 250};
        brigade_status st = brigade_session_eval(s, toks, 6, false, logits, &err);
        CHECK(!st, "%s %s: eval: %s", preset, name, err.message);
        bool finite = logits && !st;
        double amax = 0;
        for (uint32_t i = 0; finite && i < nv; i++) {
            finite = isfinite(logits[i]);
            amax = fabs(logits[i]) > amax ? fabs(logits[i]) : amax;
        }
        CHECK(finite && amax > 0 && amax < 1e4, "%s %s: logits not finite or off-scale (%g)",
              preset, name, amax);
        free(logits);
    }
    brigade_session_free(s);
    brigade_model_free(m);
    remove(fast);
    remove(fast2);
    remove(slow);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const uint32_t types[] = {
        BG_TYPE_F32,  BG_TYPE_F16,  BG_TYPE_BF16, BG_TYPE_Q8_0,   BG_TYPE_Q4_0,
        BG_TYPE_Q4_1, BG_TYPE_Q5_0, BG_TYPE_Q5_1, BG_TYPE_Q4_K,   BG_TYPE_Q5_K,
        BG_TYPE_Q6_K, BG_TYPE_IQ4_NL, BG_TYPE_IQ4_XS,
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        check_type("tiny-qwen35moe", types[i]);
    check_type("tiny-qwen3moe", BG_TYPE_Q4_K);

    /* --mix works with --fast too */
    char mix[256];
    snprintf(mix, sizeof mix, "%s/mix.gguf", dir);
    brigade_synth_options o = {.preset = "tiny-qwen35moe", .mix = true,
                               .ftype = BRIGADE_FTYPE_Q4_K_M, .seed = 2, .fast = true};
    brigade_error err;
    CHECK(!brigade_synth(mix, &o, &err), "mix: %s", err.message);
    brigade_model *m = NULL;
    CHECK(!brigade_model_load(mix, NULL, &m, &err), "mix load: %s", err.message);
    brigade_model_free(m);
    remove(mix);
    rmdir(dir);
    return check_summary("test_synth_fast");
}
