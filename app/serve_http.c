/* HTTP with libmicrohttpd, one thread per connection: the body is gathered
 * (up to a limit: 413 beyond), the API key checked (401), the request
 * routed to serve_api.c. A streamed answer is a response read from a
 * callback that waits for the task's next text; a client that leaves is
 * noticed by peeking at its socket while waiting, and its task cancelled. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <unistd.h>

#include "serve.h"

typedef struct conn_state {
    srv_buf body;
    bool too_large;
} conn_state;

struct srv_http {
    srv_state *st;
    struct MHD_Daemon *daemon;
    size_t body_limit;
    char **keys;
    size_t n_keys;
    bool verbose;
    int listen_fd;
    int quiesced_fd; /* the listening socket, ours after quiescing; -1: none */
    atomic_int in_flight; /* requests received and not yet answered in full */
};

/* Whether the client is still there: its socket not closed or reset. */
static bool conn_alive(void *user)
{
    struct MHD_Connection *c = user;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return true;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0)
        return false;
    return r > 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

typedef struct stream_ctx {
    srv_stream *stream;
    struct MHD_Connection *conn;
    srv_buf pending;
    size_t off;
    bool finished;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_ctx *x = cls;
    for (;;) {
        if (x->pending.failed)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (x->off < x->pending.len) {
            size_t n = x->pending.len - x->off;
            if (n > max)
                n = max;
            memcpy(buf, x->pending.data + x->off, n);
            x->off += n;
            return (ssize_t)n;
        }
        if (x->finished)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (!conn_alive(x->conn))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        x->pending.len = 0;
        x->off = 0;
        if (!srv_stream_next(x->stream, &x->pending, 50))
            x->finished = true;
    }
}

static void stream_done(void *cls)
{
    stream_ctx *x = cls;
    srv_stream_free(x->stream);
    srv_buf_free(&x->pending);
    free(x);
}

static enum MHD_Result send_response(struct MHD_Connection *c, srv_response *r)
{
    struct MHD_Response *resp;
    if (r->stream) {
        stream_ctx *x = calloc(1, sizeof *x);
        if (!x) {
            srv_stream_free(r->stream);
            return MHD_NO;
        }
        x->stream = r->stream;
        x->conn = c;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, x,
                                                 stream_done);
        if (!resp) {
            stream_done(x);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (r->body.failed)
            return MHD_NO;
        resp = MHD_create_response_from_buffer(r->body.len, r->body.data ? r->body.data : "",
                                               MHD_RESPMEM_MUST_COPY);
        if (!resp)
            return MHD_NO;
    }
    if (r->content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    enum MHD_Result ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static bool key_ok(const srv_http *h, struct MHD_Connection *c)
{
    if (!h->n_keys)
        return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *given = NULL;
    if (auth && !strncasecmp(auth, "Bearer ", 7))
        given = auth + 7;
    else
        given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
    for (size_t i = 0; given && i < h->n_keys; i++)
        if (!strcmp(given, h->keys[i]))
            return true;
    return false;
}

static enum MHD_Result error_now(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *message)
{
    srv_response r = {0};
    srv_api_error(&r, status, type, message);
    enum MHD_Result ret = send_response(c, &r);
    srv_buf_free(&r.body);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    conn_state *cs = *con_cls;
    char limit_msg[128];
    snprintf(limit_msg, sizeof limit_msg, "the request body is larger than the limit of %zu bytes",
             h->body_limit);
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs)))
            return MHD_NO;
        *con_cls = cs;
        atomic_fetch_add(&h->st->http_requests, 1);
        atomic_fetch_add(&h->in_flight, 1);
        const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                      MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (len && strtoull(len, NULL, 10) > h->body_limit) {
            cs->too_large = true;
            return error_now(c, 413, "invalid_request_error", limit_msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->too_large && cs->body.len + *upload_size > h->body_limit) {
            cs->too_large = true;
            srv_buf_free(&cs->body);
        }
        if (!cs->too_large)
            srv_buf_add(&cs->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_large)
        return error_now(c, 413, "invalid_request_error", limit_msg);
    if (cs->body.failed)
        return error_now(c, 500, "server_error", "out of memory for the request body");
    bool open_path = !strcmp(url, "/health") || !strcmp(url, "/v1/health");
    if (!open_path && !key_ok(h, c))
        return error_now(c, 401, "authentication_error", "Invalid API Key");
    srv_response r = {0};
    double t0 = srv_now();
    srv_api_route(h->st, method, url, cs->body.data, cs->body.len, conn_alive, c, &r);
    if (!r.status) /* the client left */
        return MHD_NO;
    if (h->verbose || r.status >= 500)
        fprintf(stderr, "serve: %s %s %u (%.0f ms%s)\n", method, url, r.status,
                (srv_now() - t0) * 1e3, r.stream ? ", streaming" : "");
    enum MHD_Result ret = send_response(c, &r);
    srv_buf_free(&r.body);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    srv_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs)
        return;
    atomic_fetch_sub(&h->in_flight, 1);
    srv_buf_free(&cs->body);
    free(cs);
    *con_cls = NULL;
}

srv_http *srv_http_start(srv_state *st, const srv_http_options *o, char *err, size_t err_size)
{
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    h->st = st;
    h->body_limit = o->body_limit;
    h->keys = o->keys;
    h->n_keys = o->n_keys;
    h->verbose = o->verbose;
    h->quiesced_fd = -1;
    atomic_init(&h->in_flight, 0);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%u", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai) {
        snprintf(err, err_size, "--host %s: %s", o->host, gai_strerror(gai));
        free(h);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
                                 MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)256, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        snprintf(err, err_size, "cannot listen on %s port %u: %s", o->host, o->port,
                 errno ? strerror(errno) : "libmicrohttpd refused");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    h->listen_fd = di ? di->listen_fd : -1;
    return h;
}

unsigned srv_http_port(const srv_http *h)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (h->listen_fd < 0 || getsockname(h->listen_fd, (struct sockaddr *)&ss, &len))
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void srv_http_quiesce(srv_http *h)
{
    MHD_socket fd = MHD_quiesce_daemon(h->daemon);
    if (fd != MHD_INVALID_SOCKET)
        h->quiesced_fd = fd; /* ours to close after the daemon stops */
}

void srv_http_stop(srv_http *h, double drain)
{
    if (!h)
        return;
    /* answers being written (the ends of streams) go out first */
    for (double until = srv_now() + drain; atomic_load(&h->in_flight) > 0 && srv_now() < until;)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    MHD_stop_daemon(h->daemon);
    if (h->quiesced_fd >= 0)
        close(h->quiesced_fd);
    free(h);
}
