/* A host-memory stand-in for the GPU device table (src/gpu.h): memory is
 * host memory and every operation is plain C with the contract the CUDA
 * kernels implement, computed as the CPU engine computes it (activations
 * converted to the weights' dot format, the same norms, rope, rotations,
 * cache conversions). tests/test_gpu_mock.c runs sessions on it;
 * tests/test_cuda_ops.c compares each CUDA operation with it. */
#ifndef BG_TEST_GPU_REFERENCE_H
#define BG_TEST_GPU_REFERENCE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp16.h"
#include "gpu.h"
#include "kernels.h"
#include "ops.h"
#include "quant.h"
#include "types.h"

struct bg_gpu {
    uint64_t free_bytes;
    void *arena;
    int n_calls;
};

static int m_init(int device, bg_gpu **out, char *desc, size_t dc, char *msg, size_t mc)
{
    (void)device, (void)msg, (void)mc;
    *out = calloc(1, sizeof **out);
    (*out)->free_bytes = 64ull << 30;
    snprintf(desc, dc, "host-memory stand-in");
    return 0;
}
static void m_destroy(bg_gpu *g)
{
    free(g->arena);
    free(g);
}
static const char *m_error(const bg_gpu *g) { return (void)g, "stand-in error"; }
static int m_mem(bg_gpu *g, uint64_t *f, uint64_t *t)
{
    *f = g->free_bytes;
    *t = 64ull << 30;
    return 0;
}
static int m_alloc(bg_gpu *g, uint64_t n, void **out)
{
    g->arena = aligned_alloc(256, (n + 255) / 256 * 256);
    memset(g->arena, 0xA5, n); /* garbage: the backend must clear what it reads */
    g->free_bytes -= n;
    *out = g->arena;
    return g->arena ? 0 : -1;
}
static int m_copy(bg_gpu *g, void *dst, const void *src, uint64_t n)
{
    g->n_calls++;
    memcpy(dst, src, n);
    return 0;
}
static int m_zero(bg_gpu *g, void *dst, uint64_t n)
{
    (void)g;
    memset(dst, 0, n);
    return 0;
}
static int m_sync(bg_gpu *g) { return (void)g, 0; }
static int m_host_alloc(bg_gpu *g, uint64_t bytes, void **out)
{
    (void)g;
    *out = malloc(bytes ? bytes : 1);
    return *out ? 0 : -1;
}
static void m_host_free(void *host) { free(host); }
/* The stand-in codes nothing ahead: its products round activations as
 * they go. */
static int m_set_scratch(bg_gpu *g, void *d, uint64_t bytes) { return (void)g, (void)d, (void)bytes, 0; }
static bool m_supports(uint32_t type)
{
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)type);
    return type == BG_TYPE_F32 || (ops && ops->dequantize);
}

/* As the CPU computes it (activations converted to the weight type's dot
 * format), so that the comparison isolates the backend's plumbing from the
 * kernels' own rounding, which the GPU check measures. */
static int m_matmul(bg_gpu *g, uint32_t type, const void *w, uint64_t n_in, uint64_t n_out,
                    const float *x, size_t xs, float *y, size_t ys, uint32_t n_tok)
{
    (void)g;
    uint64_t rb = 0;
    bg_type_row_bytes((bg_type)type, n_in, &rb);
    if (type == BG_TYPE_F32) {
        for (uint64_t o = 0; o < n_out; o++)
            for (uint32_t t = 0; t < n_tok; t++) {
                const float *row = (const float *)((const uint8_t *)w + o * rb);
                double s = 0;
                for (uint64_t i = 0; i < n_in; i++)
                    s += (double)row[i] * x[t * xs + i];
                y[t * ys + o] = (float)s;
            }
        return 0;
    }
    const bg_quant_ops *ops = bg_quant_ops_get((bg_type)type);
    const bg_quant_ops *aops = bg_quant_ops_get(ops->dot_type);
    uint8_t *act = malloc(n_in * 4 + 64);
    for (uint32_t t = 0; t < n_tok; t++) {
        aops->quantize_activations(x + t * xs, act, (int64_t)n_in);
        for (uint64_t o = 0; o < n_out; o++)
            y[t * ys + o] = ops->dot((int64_t)n_in, (const uint8_t *)w + o * rb, act);
    }
    free(act);
    return 0;
}

/* The reference leaves coded rows (the d_xq of gpu.h) alone: its products
 * work from the floats. */
static int m_rmsnorm(bg_gpu *g, float *y, size_t ys, const float *x, size_t xs, const float *w,
                     uint32_t n, uint32_t rows, float eps, uint8_t *yq)
{
    (void)g, (void)yq;
    for (uint32_t r = 0; r < rows; r++)
        bg_rmsnorm(y + r * ys, x + r * xs, w, n, eps);
    return 0;
}

static int m_add(bg_gpu *g, float *x, const float *y, uint64_t n)
{
    (void)g;
    for (uint64_t i = 0; i < n; i++)
        x[i] += y[i];
    return 0;
}

static int m_silu_mul(bg_gpu *g, float *gate, const float *up, uint32_t n, size_t stride,
                      uint32_t rows)
{
    (void)g;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < n; i++)
            gate[r * stride + i] = bg_silu(gate[r * stride + i]) * up[r * stride + i];
    return 0;
}

static int m_matmul_multi(bg_gpu *g, const bg_gpu_proj *proj, uint32_t n_proj, uint64_t n_in,
                          const float *x, size_t xs, const uint8_t *xq, uint32_t n_tok)
{
    (void)xq;
    for (uint32_t k = 0; k < n_proj; k++)
        m_matmul(g, proj[k].type, proj[k].d_w, n_in, proj[k].n_out, x, xs, proj[k].d_y,
                 proj[k].y_stride, n_tok);
    return 0;
}

static int m_matmul_swiglu(bg_gpu *g, uint32_t type, const void *wg, const void *wu,
                           uint64_t n_in, uint64_t n_out, const float *x, size_t xs, float *h,
                           size_t hs, uint32_t n_tok)
{
    float *u = malloc((size_t)n_tok * n_out * sizeof *u);
    if (!u)
        return -1;
    m_matmul(g, type, wg, n_in, n_out, x, xs, h, hs, n_tok);
    m_matmul(g, type, wu, n_in, n_out, x, xs, u, n_out, n_tok);
    for (uint32_t t = 0; t < n_tok; t++)
        for (uint64_t o = 0; o < n_out; o++)
            h[t * hs + o] = bg_silu(h[t * hs + o]) * u[t * n_out + o];
    free(u);
    return 0;
}

static int m_add_rmsnorm(bg_gpu *g, float *x, const float *y, float *xn, const float *w,
                         uint32_t n, uint32_t rows, float eps, uint8_t *xq)
{
    m_add(g, x, y, (uint64_t)n * rows);
    return m_rmsnorm(g, xn, n, x, n, w, n, rows, eps, xq);
}

static int m_expert_sum(bg_gpu *g, const bg_gpu_ffn_end *e, const float *slot, uint32_t K,
                        uint32_t n, uint32_t n_tok)
{
    float *x = e->d_x, *xn = e->d_xn;
    const float *w = e->d_w, *shared = e->d_shared, *shared_w = e->d_shared_w;
    float *o = malloc(n * sizeof *o);
    if (!o)
        return -1;
    for (uint32_t t = 0; t < n_tok; t++) {
        for (uint32_t j = 0; j < n; j++) {
            o[j] = 0;
            for (uint32_t k = 0; k < (w ? K : 1); k++)
                o[j] += (w ? w[t * K + k] : 1.0f) * slot[((size_t)t * (w ? K : 1) + k) * n + j];
        }
        if (shared) {
            float s = 0;
            for (uint32_t j = 0; j < n; j++)
                s += shared_w[j] * xn[t * n + j];
            s = bg_sigmoid(s);
            for (uint32_t j = 0; j < n; j++)
                o[j] += s * shared[t * n + j];
        }
        for (uint32_t j = 0; j < n; j++)
            x[t * n + j] += o[j];
    }
    free(o);
    return e->d_norm_w ? m_rmsnorm(g, xn, n, x, n, e->d_norm_w, n, n_tok, e->eps, e->d_xq) : 0;
}

static int m_matmul_add_rmsnorm(bg_gpu *g, const bg_gpu_proj *p, uint64_t n_in, const float *a,
                                size_t as, const uint8_t *aq, uint32_t n_tok, float *x,
                                float *xn, const float *norm_w, float eps, uint8_t *xq)
{
    (void)aq;
    return m_matmul(g, p->type, p->d_w, n_in, p->n_out, a, as, p->d_y, p->y_stride, n_tok) ||
           m_add_rmsnorm(g, x, p->d_y, xn, norm_w, (uint32_t)p->n_out, n_tok, eps, xq);
}

static uint64_t head_bytes(uint32_t type, uint32_t D)
{
    uint64_t b = 0;
    bg_type_row_bytes((bg_type)type, D, &b);
    return b;
}

/* One head's online softmax over positions [p0, p1) of its cache (kc,
 * vc: the head's first row), in the CPU's arithmetic (blocks.c's
 * attend_head): for an f16 V cache, scores by the K type's CPU dot and
 * the accumulator in f16; for the others, plain dots of the dequantized
 * keys and the accumulator in f32. q: the query as K's dot sees it. acc
 * receives the accumulator (D floats, not yet divided by S). */
static void attend_range(const bg_gpu_attn_args *a, const uint8_t *kc, const uint8_t *vc,
                         const float *q, uint32_t p0, uint32_t p1, float *acc, float *M_out,
                         float *S_out)
{
    const uint32_t D = a->head_dim;
    const bool f16_v = a->type_v == BG_TYPE_F16;
    uint16_t acc16[512], qh[512];
    float krow[512], vrow[512];
    uint8_t qx[1024];
    const bg_quant_ops *kops = bg_quant_ops_get((bg_type)a->type_k);
    const bg_quant_ops *vops = bg_quant_ops_get((bg_type)a->type_v);
    if (a->type_k == BG_TYPE_F16) {
        for (uint32_t e = 0; e < D; e++)
            qh[e] = bg_f32_to_f16(q[e]);
    } else {
        bg_quant_ops_get(kops->dot_type)->quantize_activations(q, qx, D);
    }
    const bg_dot_fn kdot = bg_kernel_dot((bg_type)a->type_k);
    memset(acc16, 0, sizeof acc16);
    memset(acc, 0, D * sizeof *acc);
    float M = -INFINITY, S = 0;
    for (uint32_t p = p0; p < p1; p++) {
        const uint8_t *kp = kc + p * a->k_row_bytes, *vp = vc + p * a->v_row_bytes;
        float sc;
        if (f16_v && kdot) {
            sc = kdot(D, kp, a->type_k == BG_TYPE_F16 ? (const void *)qh : (const void *)qx);
        } else {
            kops->dequantize(kp, krow, D);
            sc = 0;
            for (uint32_t e = 0; e < D; e++)
                sc += krow[e] * q[e];
        }
        sc *= a->scale;
        float ms = 1, vs = 1;
        if (sc > M) {
            ms = expf(M - sc);
            M = sc;
            if (f16_v)
                bg_vec_scale_f16(D, acc16, ms);
        } else {
            vs = expf(sc - M);
        }
        if (f16_v) {
            bg_vec_mad_f16(D, acc16, (const uint16_t *)(const void *)vp, vs);
        } else {
            vops->dequantize(vp, vrow, D);
            for (uint32_t e = 0; e < D; e++)
                acc[e] = acc[e] * ms + vrow[e] * vs;
        }
        S = S * ms + vs;
    }
    for (uint32_t e = 0; f16_v && e < D; e++)
        acc[e] = bg_f16_to_f32(acc16[e]);
    *M_out = M;
    *S_out = S;
}

/* One head of a token at position pos: one online softmax over all its
 * positions, or, for a decode step given split scratch, gpu.h's ranges
 * merged as gpu.h defines. q: the query (as K's dot sees it), replaced
 * by the output. */
static void attend_head(const bg_gpu_attn_args *a, const uint8_t *kc, const uint8_t *vc,
                        uint32_t pos, bool split, float *q)
{
    static float parts[BG_GPU_ATT_SPLITS][512];
    float Ms[BG_GPU_ATT_SPLITS], Ss[BG_GPU_ATT_SPLITS], w[BG_GPU_ATT_SPLITS];
    const uint32_t D = a->head_dim, n_pos = pos + 1;
    const uint32_t len = split && a->n_tok <= BG_GPU_ATT_SPLIT_TOKENS ? BG_GPU_ATT_SPLIT_LEN(n_pos)
                                                                       : n_pos;
    const uint32_t n_split = (n_pos + len - 1) / len;
    for (uint32_t z = 0; z < n_split; z++)
        attend_range(a, kc, vc, q, z * len, n_pos - z * len < len ? n_pos : z * len + len,
                     parts[z], &Ms[z], &Ss[z]);
    float M = -INFINITY, S = 0;
    for (uint32_t z = 0; z < n_split; z++)
        M = Ms[z] > M ? Ms[z] : M;
    for (uint32_t z = 0; z < n_split; z++) {
        w[z] = n_split == 1 ? 1.0f : expf(Ms[z] - M);
        S = n_split == 1 ? Ss[z] : S + Ss[z] * w[z];
    }
    const float inv = S == 0 ? 0 : 1 / S;
    for (uint32_t e = 0; e < D; e++) {
        float o = parts[0][e];
        if (n_split > 1) {
            o = 0;
            for (uint32_t z = 0; z < n_split; z++)
                o += parts[z][e] * w[z];
        }
        q[e] = o * inv;
    }
}

static int m_attention(bg_gpu *g, const bg_gpu_attn_args *a, float *q, float *kv, float *gate,
                       float *attn, const float *q_norm, const float *k_norm, uint8_t *kc,
                       uint8_t *vc, const uint32_t *tok_seq, const uint32_t *tok_pos,
                       uint8_t *attn_q, void *split)
{
    (void)g, (void)attn_q;
    const uint32_t D = a->head_dim, H = a->n_head, Hkv = a->n_head_kv;
    const size_t kv_dim = (size_t)Hkv * D;
    uint8_t *qq = malloc(D * 2 + 64);
    for (uint32_t t = 0; t < a->n_tok; t++) { /* prepare: query into attn, K/V into the cache */
        const uint32_t pos = tok_pos[t], seq = tok_seq[t];
        float *qt = attn + t * a->a_width, *k = kv + t * a->kv_width, *v = k + kv_dim;
        for (uint32_t h = 0; h < H; h++) {
            const float *src = q + t * a->q_width + (size_t)(a->gated ? 2 * h : h) * D;
            memcpy(qt + h * D, src, D * sizeof(float));
            if (a->gated)
                memcpy(gate + t * a->a_width + h * D, src + D, D * sizeof(float));
        }
        bg_rmsnorm_rows(qt, q_norm, D, H, a->eps);
        bg_rmsnorm_rows(k, k_norm, D, Hkv, a->eps);
        bg_rope_neox(qt, H, D, a->rope_dims, pos, a->rope_base);
        bg_rope_neox(k, Hkv, D, a->rope_dims, pos, a->rope_base);
        if (a->k_rotation) {
            bg_hadamard(qt, (int64_t)H * D, a->k_rotation);
            bg_hadamard(k, (int64_t)kv_dim, a->k_rotation);
        }
        if (a->v_rotation)
            bg_hadamard(v, (int64_t)kv_dim, a->v_rotation);
        /* the query as the K type's dot sees it */
        const bg_quant_ops *kops = bg_quant_ops_get((bg_type)a->type_k);
        const bg_quant_ops *qops = bg_quant_ops_get(kops->dot_type);
        for (uint32_t h = 0; h < H && a->type_k != BG_TYPE_F32; h++) {
            qops->quantize_activations(qt + h * D, qq, D);
            qops->dequantize(qq, qt + h * D, D);
        }
        kops->quantize_activations(k, kc + seq * a->k_seq_bytes + pos * a->k_row_bytes, kv_dim);
        bg_quant_ops_get((bg_type)a->type_v)
            ->quantize_activations(v, vc + seq * a->v_seq_bytes + pos * a->v_row_bytes, kv_dim);
    }
    for (uint32_t t = 0; t < a->n_tok; t++) {
        const uint32_t pos = tok_pos[t], seq = tok_seq[t];
        float *row = attn + t * a->a_width;
        for (uint32_t h = 0; h < H; h++) {
            const uint32_t kvh = h / (H / Hkv);
            attend_head(a, kc + seq * a->k_seq_bytes + kvh * head_bytes(a->type_k, D),
                        vc + seq * a->v_seq_bytes + kvh * head_bytes(a->type_v, D), pos,
                        split != NULL, row + h * D);
        }
        if (a->v_rotation)
            bg_hadamard(row, (int64_t)H * D, a->v_rotation);
        for (uint32_t j = 0; a->gated && j < H * D; j++)
            row[j] *= bg_sigmoid(gate[t * a->a_width + j]);
    }
    free(qq);
    return 0;
}

static int m_deltanet(bg_gpu *g, const bg_gpu_deltanet_args *a, float *qkv, const float *z,
                      float *heads, const float *dt, const float *A, const float *conv_w,
                      const float *norm_w, float *conv, float *ssm, float *attn, uint8_t *attn_q,
                      const uint32_t *tok_seq)
{
    (void)g, (void)attn_q;
    const uint32_t S = a->state, Hk = a->n_k_heads, Hv = a->n_v_heads, K = a->conv_kernel;
    const uint32_t key_dim = S * Hk, conv_dim = 2 * key_dim + S * Hv;
    for (uint32_t t = 0; t < a->n_tok; t++) {
        float *b = heads + t * 2 * Hv;
        for (uint32_t h = 0; h < Hv; h++) {
            b[h] = bg_sigmoid(b[h]);
            b[Hv + h] = bg_softplus(b[Hv + h] + dt[h]) * A[h];
        }
    }
    for (uint32_t t = 0; t < a->n_tok; t++) {
        float *x = qkv + t * a->q_width;
        float *cs = conv + tok_seq[t] * a->conv_seq_floats;
        for (uint32_t c = 0; c < conv_dim; c++) {
            float *hist = cs + c * (K - 1), acc = 0;
            for (uint32_t j = 0; j + 1 < K; j++)
                acc += hist[j] * conv_w[c * K + j];
            acc += x[c] * conv_w[c * K + K - 1];
            memmove(hist, hist + 1, (K - 2) * sizeof(float));
            hist[K - 2] = x[c];
            x[c] = bg_silu(acc);
        }
        for (uint32_t h = 0; h < 2 * Hk; h++)
            bg_l2norm(x + h * S, S, a->eps);
        const float scale = 1.0f / sqrtf((float)S);
        for (uint32_t h = 0; h < Hv; h++) {
            float *M = ssm + tok_seq[t] * a->ssm_seq_floats + (size_t)h * S * S;
            const float *qh = x + (h % Hk) * S, *kh = x + key_dim + (h % Hk) * S;
            const float *vh = x + 2 * key_dim + h * S;
            const float beta = heads[t * 2 * Hv + h], gd = expf(heads[t * 2 * Hv + Hv + h]);
            for (uint32_t r = 0; r < S; r++) {
                float *row = M + r * S, mk = 0, mq = 0;
                for (uint32_t j = 0; j < S; j++) {
                    row[j] *= gd;
                    mk += row[j] * kh[j];
                }
                const float d = (vh[r] - mk) * beta;
                for (uint32_t j = 0; j < S; j++) {
                    row[j] += kh[j] * d;
                    mq += row[j] * qh[j];
                }
                attn[t * a->a_width + h * S + r] = mq * scale;
            }
            float *o = attn + t * a->a_width + h * S;
            bg_rmsnorm(o, o, norm_w, S, a->eps);
            for (uint32_t j = 0; j < S; j++)
                o[j] *= bg_silu(z[t * a->a_width + h * S + j]);
        }
    }
    return 0;
}

/* The slots filed by expert in BG_GPU_MOE_GROUP_INTS' layout, each group
 * in slot order. */
static void m_group(const int32_t *chosen, uint32_t n_slots, uint32_t n_expert, int32_t *groups)
{
    int32_t *offsets = groups, *n_active = groups + n_expert + 1, *active = n_active + 1;
    int32_t *rank_first = active + n_expert, *rank_slot = rank_first + n_expert + 1;
    int32_t *sorted = rank_slot + n_expert, at = 0;
    *n_active = 0;
    for (uint32_t e = 0; e < n_expert; e++) {
        offsets[e] = at;
        for (uint32_t s = 0; s < n_slots; s++)
            if (chosen[s] == (int32_t)e)
                sorted[at++] = (int32_t)s;
        if (at > offsets[e]) {
            rank_first[*n_active] = offsets[e];
            rank_slot[*n_active] = sorted[offsets[e]];
            active[(*n_active)++] = (int32_t)e;
        }
    }
    offsets[n_expert] = at;
    rank_first[*n_active] = at;
}

static int m_route(bg_gpu *g, const bg_gpu_proj *r, uint64_t n_in, const float *x,
                   const uint8_t *xq, uint32_t n_tok, uint32_t K, int32_t *chosen,
                   float *chosen_w, int32_t *groups)
{
    (void)xq;
    float *router = r->d_y;
    const uint32_t n_expert = (uint32_t)r->n_out;
    if (m_matmul(g, r->type, r->d_w, n_in, n_expert, x, n_in, router, n_expert, n_tok))
        return -1;
    for (uint32_t t = 0; t < n_tok; t++) {
        float *p = router + t * n_expert;
        bg_softmax(p, n_expert, 1.0f);
        double sum = 0;
        for (uint32_t k = 0; k < K; k++) {
            int32_t best = -1;
            for (uint32_t e = 0; e < n_expert; e++) {
                bool taken = false;
                for (uint32_t j = 0; j < k; j++)
                    taken |= chosen[t * K + j] == (int32_t)e;
                if (!taken && (best < 0 || p[e] > p[best]))
                    best = (int32_t)e;
            }
            chosen[t * K + k] = best;
            sum += p[best];
        }
        const float total = fmaxf((float)sum, 6.103515625e-5f);
        for (uint32_t k = 0; k < K; k++)
            chosen_w[t * K + k] = p[chosen[t * K + k]] / total;
    }
    if (groups)
        m_group(chosen, n_tok * K, n_expert, groups);
    return 0;
}

/* Expert by expert over route's grouping, each slot on its own. */
static int m_moe(bg_gpu *g, const bg_gpu_moe_args *a, const float *xn, const uint8_t *xq,
                 const void *wg, const void *wu, const void *wd, const int32_t *groups, float *h,
                 float *slot_out, const bg_gpu_ffn_end *end)
{
    (void)xq;
    const uint32_t K = a->n_used, E = a->n_embd, F = a->n_ff, n_expert = a->n_expert;
    const int32_t *offsets = groups, *sorted = groups + 4 * n_expert + 3;
    float *up = malloc(F * sizeof *up);
    if (!up)
        return -1;
    /* expert n_expert: the shared one, in slots n_tok * K + t */
    const uint32_t n_routed = a->n_tok * K;
    for (uint32_t e = 0; e <= n_expert; e++) {
        const bool shared = e == n_expert;
        if (shared && !a->d_down_shexp)
            break;
        const uint8_t *eg = shared ? a->d_gate_shexp : (const uint8_t *)wg + e * a->gate_expert_bytes;
        const uint8_t *eu = shared ? a->d_up_shexp : (const uint8_t *)wu + e * a->up_expert_bytes;
        const uint8_t *ed = shared ? a->d_down_shexp : (const uint8_t *)wd + e * a->down_expert_bytes;
        const int32_t first = shared ? 0 : offsets[e];
        const int32_t end = shared ? (int32_t)a->n_tok : offsets[e + 1];
        for (int32_t i = first; i < end; i++) {
            const uint32_t s = shared ? n_routed + (uint32_t)i : (uint32_t)sorted[i];
            const float *x = xn + (shared ? (uint32_t)i : s / K) * E;
            m_matmul(g, a->type_gate, eg, E, F, x, E, h + s * F, F, 1);
            m_matmul(g, a->type_up, eu, E, F, x, E, up, F, 1);
            m_silu_mul(g, h + s * F, up, F, F, 1);
            m_matmul(g, a->type_down, ed, F, E, h + s * F, F, slot_out + s * E, E, 1);
        }
    }
    free(up);
    return end ? m_expert_sum(g, end, slot_out, end->d_w ? K : 1, E, a->n_tok) : 0;
}

static int m_graph_begin(bg_gpu *g, uint64_t key, bool *replay)
{
    (void)g, (void)key;
    *replay = false;
    return 1; /* no graphs: eager */
}
static int m_graph_end(bg_gpu *g, uint64_t key, uint32_t *n_nodes)
{
    return (void)g, (void)key, (void)n_nodes, 0;
}

/* The table's matmul: coded rows (gpu.h) are left to the device. */
static int m_matmul_coded(bg_gpu *g, uint32_t type, const void *w, uint64_t n_in, uint64_t n_out,
                          const float *x, size_t xs, const uint8_t *xq, float *y, size_t ys,
                          uint32_t n_tok)
{
    (void)xq;
    return m_matmul(g, type, w, n_in, n_out, x, xs, y, ys, n_tok);
}

static const bg_gpu_api mock = {
    .init = m_init,
    .destroy = m_destroy,
    .error = m_error,
    .mem_info = m_mem,
    .alloc = m_alloc,
    .upload = m_copy,
    .wait_uploads = m_sync, /* the copies are done on return */
    .download = m_copy,
    .download_async = m_copy,
    .zero = m_zero,
    .host_alloc = m_host_alloc,
    .host_free = m_host_free,
    .set_scratch = m_set_scratch,
    .sync = m_sync,
    .supports = m_supports,
    .matmul = m_matmul_coded,
    .matmul_multi = m_matmul_multi,
    .matmul_swiglu = m_matmul_swiglu,
    .rmsnorm = m_rmsnorm,
    .add_rmsnorm = m_add_rmsnorm,
    .matmul_add_rmsnorm = m_matmul_add_rmsnorm,
    .attention = m_attention,
    .deltanet = m_deltanet,
    .route = m_route,
    .moe = m_moe,
    .expert_sum = m_expert_sum,
    .silu_mul = m_silu_mul,
    .graph_begin = m_graph_begin,
    .graph_end = m_graph_end,
};

#endif
