/* The GPU side of a session: the split of layers from the options, the
 * device arena laid out by gpu_plan.c, and the forward pass of GPU layers
 * written once, in C, over the device interface of gpu.h. session.c calls
 * these when a session has GPU layers; model code never sees the GPU. */
#ifndef BG_GPU_BACKEND_H
#define BG_GPU_BACKEND_H

#include "gpu.h"
#include "gpu_plan.h"
#include "placement.h"
#include "session.h"

typedef struct bg_gpu_session bg_gpu_session;

/* Tests only: sessions created after this use `api` instead of the build's
 * device (a host-memory stand-in checks this file's plumbing without a
 * GPU); NULL restores the build's. */
void bg_gpu_api_override(const bg_gpu_api *api);

/* Chooses the split (explicit -ngl/--n-cpu-moe, or the planner's choice
 * for the budget), starts the device, lays out and allocates the arena,
 * uploads the weights of the GPU layers and zeroes their state. place is
 * the planner's input for this model and session. *out is NULL (and the
 * session runs on the CPU) when -ngl auto finds room for no layer. */
brigade_status bg_gpu_session_new(const brigade_model *m, const bg_session_plan *plan,
                                  const brigade_session_options *opts,
                                  const bg_place_input *place, bg_gpu_session **out,
                                  brigade_error *err);
void bg_gpu_session_free(bg_gpu_session *gs);

const bg_gpu_split *bg_gpu_session_split(const bg_gpu_session *gs);
/* Whether the session's buffer (BG_BUF_*) crosses to and from the device
 * (the hidden state, the experts' choice, token positions): it is then
 * allocated page-locked, so its copies run at full speed. */
bool bg_gpu_buffer_crosses(int buf);
/* Page-locked host memory (the crossing buffers, the logits), and how to
 * release it (also after the session), or NULL. */
void *bg_gpu_host_alloc(bg_gpu_session *gs, uint64_t bytes, void (**release)(void *));
void bg_gpu_session_report(const bg_gpu_session *gs, brigade_gpu_report *out);

/* Waits until the device has read the micro-batch buffers the last one
 * uploaded (page-locked: its copies read them when the stream gets
 * there), before the host writes the next one's: a prompt's micro-batches
 * are enqueued without waiting for each other. */
brigade_status bg_gpu_inputs_free(bg_gpu_session *gs, brigade_error *err);
/* A new micro-batch: s->x (embeddings) is on the host, token positions
 * and sequences go to the device. */
brigade_status bg_gpu_begin(bg_gpu_session *gs, const brigade_session *s, brigade_error *err);
/* The GPU layers (the last ones) over the micro-batch, x kept on the
 * device; a layer whose routed experts are on the CPU sends the normed
 * hidden state and the expert choice to the host and gets the experts' sum
 * back. Decode steps with everything on the GPU replay a CUDA graph. */
brigade_status bg_gpu_layers(bg_gpu_session *gs, brigade_session *s, brigade_error *err);
/* The output head on the GPU: rows[r] are the micro-batch tokens whose
 * logits go to logits[r * n_vocab]. */
brigade_status bg_gpu_head(bg_gpu_session *gs, brigade_session *s, const uint32_t *rows,
                           uint32_t n_rows, float *logits, brigade_error *err);

/* A sequence's state in a GPU layer: zeroed, or copied to/from a
 * checkpoint buffer (conv then ssm, as the CPU layout). */
brigade_status bg_gpu_seq_clear(bg_gpu_session *gs, const brigade_session *s, uint32_t seq);
brigade_status bg_gpu_seq_copy(bg_gpu_session *gs, const brigade_session *s, uint32_t il,
                               uint32_t seq, uint8_t *buf, bool save, brigade_error *err);

#endif
