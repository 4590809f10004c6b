/* brigade serve -m MODEL: an OpenAI-compatible server. It listens first
 * (health answers 503 while the model loads), then serves until SIGINT or
 * SIGTERM: it stops accepting connections, lets running requests finish
 * for a few seconds, stops the rest, and exits 0. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "generate.h"
#include "serve.h"

#define SHUTDOWN_GRACE 5.0

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: brigade serve -m MODEL [options]\n"
            "  --host ADDR               address to listen on (default 127.0.0.1)\n"
            "  --port N                  port (default 8080; 0: any free port)\n"
            "  -np, --parallel N         requests decoded together, one slot each (default 1)\n"
            "  -c, --ctx-size N          context of all slots together, split evenly\n"
            "                            (default: min(model's, 4096) per slot)\n"
            "  --api-key KEY             require this key (Authorization: Bearer KEY); repeatable\n"
            "  --api-key-file FILE       keys, one per line\n"
            "  --alias NAME              model name in responses (default: the file's name)\n"
            "  --chat-template-file F    use this chat template instead of the model's\n"
            "  --metrics                 serve Prometheus metrics at /metrics\n"
            "  --max-queue N             requests waiting for a slot before 503 (default 64)\n"
            "  --body-limit BYTES        largest request body (default 8388608)\n"
            "  --ctx-checkpoints N       recurrent-state checkpoints per slot (default 3)\n"
            "  -n, --temp, --top-k, --top-p, --min-p, --seed, --no-think, ...\n"
            "                            defaults for requests that do not say\n");
    gen_flags_usage(out);
}

static bool add_key(char ***keys, size_t *n, const char *key, size_t len)
{
    char **grown = realloc(*keys, (*n + 1) * sizeof **keys);
    if (!grown)
        return false;
    *keys = grown;
    return (grown[*n] = strndup(key, len)) != NULL && ++*n;
}

static bool read_keys(const char *path, char ***keys, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "serve: cannot read %s\n", path);
        return false;
    }
    char line[4096];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        while (len && (line[len - 1] == ' ' || line[len - 1] == '\t'))
            len--;
        if (len && line[0] != '#')
            ok = add_key(keys, n, line, len);
    }
    fclose(f);
    return ok;
}

static brigade_status load_template(const char *path, brigade_chat_template **out,
                                    brigade_error *err)
{
    size_t len;
    char *text = cli_read_file(path, &len, NULL);
    if (!text) {
        snprintf(err->message, sizeof err->message, "cannot read the chat template %s", path);
        return err->status = BRIGADE_ERR_IO;
    }
    brigade_status st = brigade_chat_template_from_string(text, len, out, err);
    free(text);
    return st;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cmd_serve(int argc, char **argv)
{
    gen_flags f;
    gen_flags_init(&f);
    srv_http_options ho = {.host = "127.0.0.1", .port = 8080, .body_limit = 8u << 20};
    srv_sched_options so = {.n_slots = 1, .max_queue = 64, .n_checkpoints = 3};
    srv_state st = {.alias = NULL, .n_predict = -1};
    const char *key_file = NULL, *template_file = NULL;
    char **keys = NULL;
    size_t n_keys = 0;
    uint32_t total_ctx = 0;
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint32_t u;
        uint64_t u64;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            serve_usage(stdout);
            rc = 0;
            goto out;
        }
        if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && v) {
            if (!cli_parse_u32(a, v, &total_ctx))
                goto out;
            i++;
            continue;
        }
        int taken = gen_parse_flag(&f, argc, argv, &i);
        if (taken < 0)
            goto out;
        if (taken)
            continue;
        if (!strcmp(a, "--metrics")) {
            st.metrics = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "serve: unknown option or missing value: %s\n", a);
            serve_usage(stderr);
            goto out;
        }
        i++;
        if (!strcmp(a, "--host"))
            ho.host = v;
        else if (!strcmp(a, "--port") && cli_parse_u32(a, v, &u) && u <= 65535)
            ho.port = u;
        else if ((!strcmp(a, "-np") || !strcmp(a, "--parallel")) && cli_parse_u32(a, v, &u) &&
                 u >= 1 && u <= 256)
            so.n_slots = u;
        else if (!strcmp(a, "--api-key")) {
            if (!*v || !add_key(&keys, &n_keys, v, strlen(v))) {
                fprintf(stderr, "serve: --api-key needs a non-empty key\n");
                goto out;
            }
        } else if (!strcmp(a, "--api-key-file"))
            key_file = v;
        else if (!strcmp(a, "--alias"))
            st.alias = v;
        else if (!strcmp(a, "--chat-template-file"))
            template_file = v;
        else if (!strcmp(a, "--max-queue") && cli_parse_u32(a, v, &u))
            so.max_queue = u;
        else if (!strcmp(a, "--body-limit") && cli_parse_u64(a, v, &u64) && u64 >= 1024)
            ho.body_limit = (size_t)u64;
        else if (!strcmp(a, "--ctx-checkpoints") && cli_parse_u32(a, v, &u) && u <= 64)
            so.n_checkpoints = u;
        else {
            fprintf(stderr, "serve: unknown option or bad value: %s %s\n", a, v);
            serve_usage(stderr);
            goto out;
        }
    }
    if (!f.model_path) {
        serve_usage(stderr);
        goto out;
    }
    if (f.system) {
        fprintf(stderr, "serve: --system is for run and chat; send a system message instead\n");
        goto out;
    }
    if (key_file && !read_keys(key_file, &keys, &n_keys)) {
        rc = 1;
        goto out;
    }
    if (key_file && !n_keys) {
        fprintf(stderr, "serve: %s holds no key\n", key_file);
        rc = 1;
        goto out;
    }
    if (total_ctx && total_ctx < so.n_slots) {
        fprintf(stderr, "serve: a context of %u cannot be split among %u slots\n", total_ctx,
                so.n_slots);
        goto out;
    }
    f.session.n_ctx = total_ctx / so.n_slots;
    f.session.n_seq_max = so.n_slots;
    so.n_batch = f.session.n_ubatch ? f.session.n_ubatch : 512;
    so.verbose = f.verbose;
    ho.keys = keys;
    ho.n_keys = n_keys;
    ho.verbose = f.verbose;
    st.alias = st.alias ? st.alias : base_name(f.model_path);
    st.model_path = f.model_path;
    st.sampling = f.sampling;
    st.n_predict = f.n_predict;
    st.no_think = f.no_think;
    st.started = (double)time(NULL);
    atomic_init(&st.ready, false);
    atomic_init(&st.stopping, false);
    atomic_init(&st.http_requests, 0);
    atomic_init(&st.http_errors, 0);
    rc = 1;

    /* SIGINT and SIGTERM are taken by sigwait below: blocked in every
     * thread, which inherit the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0); /* before any thread makes an object */

    char msg[256];
    srv_http *http = srv_http_start(&st, &ho, msg, sizeof msg);
    if (!http) {
        fprintf(stderr, "serve: %s\n", msg);
        goto out;
    }
    fprintf(stderr, "serve: listening on http://%s%s%s:%u (loading %s)\n",
            strchr(ho.host, ':') ? "[" : "", ho.host, strchr(ho.host, ':') ? "]" : "",
            srv_http_port(http), f.model_path);

    brigade_error err = {0};
    brigade_session *session = NULL;
    brigade_status s = brigade_model_load(f.model_path, &f.model, &st.model, &err);
    if (!s)
        s = brigade_vocab_load(brigade_model_file(st.model), &st.vocab, &err);
    if (!s && template_file)
        s = load_template(template_file, &st.tmpl, &err);
    else if (!s)
        s = brigade_chat_template_from_gguf(brigade_model_file(st.model), &st.tmpl, &err);
    if (!s)
        s = brigade_session_new(st.model, &f.session, &session, &err);
    if (!s) {
        st.n_ctx = brigade_session_n_ctx(session);
        s = srv_sched_start(st.model, session, st.vocab, &so, &st.sched, &err);
    }
    if (s) {
        fprintf(stderr, "serve: %s\n", err.message);
        srv_http_stop(http, 0);
        goto free_model;
    }
    const char *warning = brigade_chat_template_warning(st.tmpl);
    if (warning)
        fprintf(stderr, "warning: %s\n", warning);
    brigade_memory mem;
    brigade_session_memory(session, &mem);
    char kv[32];
    fprintf(stderr,
            "serve: ready: %s (%s), %u slots of %u tokens, KV and state %s, template %s%s\n",
            st.alias, brigade_model_arch(st.model), so.n_slots, st.n_ctx,
            cli_format_bytes(mem.kv_bytes + mem.recurrent_bytes, kv, sizeof kv),
            brigade_chat_family_name(brigade_chat_template_family(st.tmpl)),
            n_keys ? ", API key required" : "");
    atomic_store(&st.ready, true);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "serve: %s: finishing the requests in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    atomic_store(&st.stopping, true);
    srv_http_quiesce(http);
    srv_sched_stop(st.sched, SHUTDOWN_GRACE);
    srv_http_stop(http, 2.0);
    srv_sched_free(st.sched);
    fprintf(stderr, "serve: stopped\n");
    rc = 0;
free_model:
    brigade_chat_template_free(st.tmpl);
    brigade_vocab_free(st.vocab);
    brigade_model_free(st.model);
out:
    for (size_t i = 0; i < n_keys; i++)
        free(keys[i]);
    free(keys);
    return rc;
}
