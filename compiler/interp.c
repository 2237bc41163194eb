// interp.c — the reference interpreter: the oracle every compiled path is
// checked against.
//
// It walks the nodes in order and computes each one with the plainest loops
// that match PyTorch's definitions (see bc.h for the ops).  Three choices keep
// it trustworthy rather than fast:
//
//   * Every value gets its own malloc'ed float buffer, allocated when its
//     defining node runs.  The memory plan (offsets, aliases) is ignored, so
//     a planner bug cannot hide here, and a read of a value that was never
//     written is caught instead of returning stale memory.
//   * Values are stored as float, as compiled code stores them, but every
//     sum inside a node (dot products, LayerNorm statistics, softmax) is
//     accumulated in double, and a node's intermediates (QKV, attention
//     weights, the FFN hidden layer) stay double.
//   * Nothing is trusted: shapes, arities, parameter shapes and weight
//     pointers are checked before a node runs; a mismatch is a blockc bug
//     and is reported as BC_EINTERNAL.
//
// Fused ops round their internal sum to float before normalizing, exactly
// as the unfused Add would have stored it, so interpreting a graph before
// and after the fusion passes gives bit-identical results.
//
// The k_* kernels at the top work on plain arrays and know nothing about
// graphs, so they can be lifted out and reused (e.g. by a test's own
// reference or a future debugging tool).
#include "ops.h"

#include "blockc_rt.h"  // bcrt_quant_act: the Q8_0 / Q4_0 products' activations

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Kernels: arrays in, arrays out, no allocation, no graph.
// ---------------------------------------------------------------------------

// out = alpha*a + beta*b, elementwise over n floats.
static void k_add(int64_t n, double alpha, const float *a, double beta, const float *b,
                  float *out) {
  for (int64_t i = 0; i < n; i++) out[i] = (float)(alpha * a[i] + beta * b[i]);
}

// LayerNorm of one row of d floats: biased variance, eps inside the sqrt.
// w and/or b may be NULL (no affine).  A constant row gives x - mean == 0
// exactly (d copies of a float sum exactly in double, and the division by d
// is then exact), so the output is exactly the bias.  Non-finite inputs
// simply propagate as NaN/inf through the arithmetic.
static void k_layernorm_row(int64_t d, const float *x, const float *w, const float *b,
                            double eps, float *out) {
  double sum = 0;
  for (int64_t i = 0; i < d; i++) sum += x[i];
  double mean = sum / (double)d;
  double ss = 0;
  for (int64_t i = 0; i < d; i++) ss += (x[i] - mean) * (x[i] - mean);
  double sd = sqrt(ss / (double)d + eps);
  for (int64_t i = 0; i < d; i++) {
    double y = (x[i] - mean) / sd;
    if (w) y *= w[i];
    if (b) y += b[i];
    out[i] = (float)y;
  }
}

// A weight matrix as the kernels read it: element (o, k) of PyTorch's
// (out, in) matrix is w[o*ld + k], or w[k*ld + o] when the checkpoint stores
// it (in, out) (GPT-2's Conv1D, layout=in_out).  ld lets a view start inside
// a packed matrix (the K rows of a packed Q|K|V projection).
typedef bcR_wview wview;  // ops.h

// y[r, o] = sum_k x[r, k] * W(o, k) + bias[o]: PyTorch's Linear, x W^T + b.
// With W stored (out, in) both x's row and W's row are contiguous, so every
// dot product streams through memory; four outputs are computed side by
// side only so that four independent sums are in flight.  Stored (in, out),
// the loop runs over k outside and o inside.  Either way each sum adds its
// terms in order k = 0, 1, 2, ...  bias may be NULL.
static void k_linear(int64_t rows, int64_t in, int64_t out, const double *x, const wview *W,
                     const float *bias, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * in;
    double *yr = y + r * out;
    if (W->in_out) {
      for (int64_t o = 0; o < out; o++) yr[o] = 0;
      for (int64_t k = 0; k < in; k++) {
        const float *wk = W->w + k * W->ld;
        for (int64_t o = 0; o < out; o++) yr[o] += xr[k] * wk[o];
      }
    } else {
      int64_t o = 0;
      for (; o + 4 <= out; o += 4) {
        const float *w0 = W->w + o * W->ld, *w1 = w0 + W->ld, *w2 = w1 + W->ld, *w3 = w2 + W->ld;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int64_t k = 0; k < in; k++) {
          double xv = xr[k];
          s0 += xv * w0[k];
          s1 += xv * w1[k];
          s2 += xv * w2[k];
          s3 += xv * w3[k];
        }
        yr[o] = s0;
        yr[o + 1] = s1;
        yr[o + 2] = s2;
        yr[o + 3] = s3;
      }
      for (; o < out; o++) {
        const float *wo = W->w + o * W->ld;
        double s = 0;
        for (int64_t k = 0; k < in; k++) s += xr[k] * wo[k];
        yr[o] = s;
      }
    }
    if (bias)
      for (int64_t o = 0; o < out; o++) yr[o] += bias[o];
  }
}

// An (out, in) matrix of a node: contiguous, in the node's layout.
static wview wfull(const float *w, int64_t out, int64_t in, bool in_out) {
  return (wview){w, in_out ? out : in, in_out};
}

// RMSNorm of one row: x / sqrt(mean(x^2) + eps) * (off + w) (LLaMA's
// RMSNorm; Gemma's with off = 1).
static void k_rmsnorm_row(int64_t d, const float *x, const float *w, double off, double eps,
                          float *out) {
  double ss = 0;
  for (int64_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
  double r = sqrt(ss / (double)d + eps);
  for (int64_t i = 0; i < d; i++) out[i] = (float)(x[i] / r * (w ? off + (double)w[i] : 1.0));
}

// One attention head for one query row i.  q points at row i's head slice;
// k and v at row 0's head slices, consecutive rows `ld` doubles apart.
// Keys j > jmax are masked: they are skipped, i.e. get exactly zero weight,
// which is what softmax gives for a -inf score, without any inf arithmetic.
// p is scratch for jmax+1 weights; out (dh doubles) receives sum_j p_j v_j.
// Keys j < jmin (a sliding window) are masked the same way; cap > 0
// soft-caps each score, s -> cap * tanh(s / cap), before the softmax.
static void k_attend_row(int64_t jmin, int64_t jmax, int64_t dh, int64_t ld, const double *q,
                         const double *k, const double *v, double scale, double cap, double *p,
                         double *out) {
  for (int64_t c = 0; c < dh; c++) out[c] = 0;
  if (jmin > jmax) return;
  for (int64_t j = jmin; j <= jmax; j++) {
    const double *kj = k + j * ld;
    double s = 0;
    for (int64_t c = 0; c < dh; c++) s += q[c] * kj[c];
    p[j] = s * scale;
    if (cap > 0) p[j] = cap * tanh(p[j] / cap);
  }
  // Softmax, subtracting the row max so exp never overflows.
  double m = p[jmin];
  for (int64_t j = jmin + 1; j <= jmax; j++)
    if (p[j] > m) m = p[j];
  double z = 0;
  for (int64_t j = jmin; j <= jmax; j++) {
    p[j] = exp(p[j] - m);
    z += p[j];
  }
  for (int64_t j = jmin; j <= jmax; j++) p[j] /= z;
  // out = P v, walking v row by row so the inner loop is contiguous.
  for (int64_t j = jmin; j <= jmax; j++) {
    const double *vj = v + j * ld;
    for (int64_t c = 0; c < dh; c++) out[c] += p[j] * vj[c];
  }
}

// QK-norm (issue 23): each of the rows segments of w doubles at x (one per
// head, or a whole projection row) normalised in place by RMSNorm (rms) or
// LayerNorm with weight g and bias b (b may be NULL).
static void k_seg_norm(int64_t nseg, int64_t w, double *x, const float *g, const float *b,
                       bool rms, double eps) {
  for (int64_t r = 0; r < nseg; r++) {
    double *xr = x + r * w, m = 0, ss = 0;
    if (!rms) {
      for (int64_t i = 0; i < w; i++) m += xr[i];
      m /= (double)w;
    }
    for (int64_t i = 0; i < w; i++) ss += (xr[i] - m) * (xr[i] - m);
    double rs = 1.0 / sqrt(ss / (double)w + eps);
    for (int64_t i = 0; i < w; i++) xr[i] = (xr[i] - m) * rs * g[i] + (b ? b[i] : 0.0);
  }
}

// Workspace (in doubles) k_attention needs for t query rows, s key rows,
// width d, query width qd (heads * head width) and key/value width kvd.
static int64_t attention_ws(int64_t t, int64_t s, int64_t d, int64_t qd, int64_t kvd) {
  return 2 * t * d + 2 * t * qd + s * d + 2 * s * kvd + s;
}

// The rows and masks of one sequence for k_attention.
typedef struct attn_seq {
  int64_t t, s;        // query rows, key rows
  int64_t qvalid;      // query rows < qvalid are computed; the rest are written as 0
  int64_t kvalid;      // keys >= kvalid get zero weight
} attn_seq;

// An Attention node's shape and weights, as k_attention reads them.
typedef struct attn_def {
  int64_t d, heads, kv_heads;    // width, query heads, key/value heads
  int64_t dh;                    // head width (head_dim=, default d / heads)
  bool causal, rope;
  double rope_theta;
  wview q, k, v, o;              // (H dh, D), (KV dh, D), (KV dh, D), (D, H dh)
  const float *bq, *bk, *bv, *bo;
  // Issue 23: QK-norm (0 none, 1 rms, 2 layernorm) and its weights, the
  // window (0: none), the soft-cap (0: none), the scale (0: 1/sqrt(dh)) and
  // the head scales (NULL: none).
  int qk_norm;
  bool per_head;
  double qk_eps, softcap, scale;
  int64_t window;
  const float *qn, *qnb, *kn, *knb, *hs;
  int aq;  // the weight type whose products quantize their inputs (bcR_act_quant), 0 none
} attn_def;

// Rotary positions, Hugging Face LLaMA's rotate_half convention: in each
// head, element j < dh/2 pairs with j + dh/2; the pair rotates by
// pos * theta^(-2j/dh): x'[j] = x[j] cos - x[j + dh/2] sin and
// x'[j + dh/2] = x[j + dh/2] cos + x[j] sin.
static void k_rope_row(double *x, int64_t nheads, int64_t dh, int64_t pos, double theta) {
  int64_t half = dh / 2;
  for (int64_t h = 0; h < nheads; h++) {
    double *xh = x + h * dh;
    for (int64_t j = 0; j < half; j++) {
      double a = (double)pos * pow(theta, -2.0 * (double)j / (double)dh);
      double c = cos(a), s = sin(a), x0 = xh[j], x1 = xh[j + half];
      xh[j] = x0 * c - x1 * s;
      xh[j + half] = x1 * c + x0 * s;
    }
  }
}

// Multi-head attention over one sequence: x is [t, d] floats (queries), kv
// is [s, d] (keys and values; kv == x for self-attention), y is [t, d].
// q = x Wq^T + bq, k = kv Wk^T + bk, v = kv Wv^T + bv; query head h uses
// columns [h*dh, (h+1)*dh) of q and key/value head h / (heads/kv_heads) of k
// and v (grouped-query attention; kv_heads == heads is plain multi-head);
// heads are concatenated and projected by Wo.  Biases may be NULL.  Padded
// query rows (>= qvalid) are exactly zero in y, as the language promises
// (PyTorch leaves them unspecified).
static void k_attention(const attn_seq *sq, const attn_def *A, const float *x, const float *kv,
                        double *ws, float *y) {
  int64_t t = sq->t, s = sq->s, d = A->d, dh = A->dh, kvd = A->kv_heads * dh;
  int64_t qd = A->heads * dh;
  int64_t group = A->heads / A->kv_heads;
  double *xd = ws;              // [t, d]    queries' input widened to double
  double *q = xd + t * d;       // [t, qd]
  double *cat = q + t * qd;     // [t, qd]   heads concatenated
  double *yd = cat + t * qd;    // [t, d]
  double *kvx = yd + t * d;     // [s, d]    keys' input widened
  double *k = kvx + s * d;      // [s, kvd]
  double *v = k + s * kvd;      // [s, kvd]
  double *p = v + s * kvd;      // [s]       one row of attention weights
  double scale = A->scale > 0 ? A->scale : 1.0 / sqrt((double)dh);
  for (int64_t i = 0; i < t * d; i++) xd[i] = x[i];
  for (int64_t i = 0; i < s * d; i++) kvx[i] = kv[i];
  bcR_quant_x(A->aq, t, d, xd);
  bcR_quant_x(A->aq, s, d, kvx);
  k_linear(t, d, qd, xd, &A->q, A->bq, q);
  k_linear(s, d, kvd, kvx, &A->k, A->bk, k);
  k_linear(s, d, kvd, kvx, &A->v, A->bv, v);
  if (A->qk_norm) {  // before the rotations (Qwen3, OLMo 2)
    bool rms = A->qk_norm == 1;
    k_seg_norm(A->per_head ? t * A->heads : t, A->per_head ? dh : qd, q, A->qn, A->qnb, rms,
               A->qk_eps);
    k_seg_norm(A->per_head ? s * A->kv_heads : s, A->per_head ? dh : kvd, k, A->kn, A->knb, rms,
               A->qk_eps);
  }
  if (A->rope) {
    for (int64_t i = 0; i < t; i++) k_rope_row(q + i * qd, A->heads, dh, i, A->rope_theta);
    for (int64_t j = 0; j < s; j++) k_rope_row(k + j * kvd, A->kv_heads, dh, j, A->rope_theta);
  }
  for (int64_t h = 0; h < A->heads; h++)
    for (int64_t i = 0; i < sq->qvalid; i++) {
      int64_t jmax = sq->kvalid - 1;
      if (A->causal && i < jmax) jmax = i;
      int64_t jmin = A->window > 0 && i - A->window + 1 > 0 ? i - A->window + 1 : 0;
      int64_t g = h / group;
      k_attend_row(jmin, jmax, dh, kvd, q + i * qd + h * dh, k + g * dh, v + g * dh, scale,
                   A->softcap, p, cat + i * qd + h * dh);
      if (A->hs)
        for (int64_t c = 0; c < dh; c++) cat[i * qd + h * dh + c] *= (double)A->hs[h];
    }
  bcR_quant_x(A->aq, sq->qvalid, qd, cat);
  k_linear(sq->qvalid, qd, d, cat, &A->o, A->bo, yd);
  for (int64_t i = 0; i < t * d; i++) y[i] = i < sq->qvalid * d ? (float)yd[i] : 0.0f;
}

// ---------------------------------------------------------------------------
// The interpreter: checks each node against the graph, then runs a kernel.
// ---------------------------------------------------------------------------

typedef struct bcR_interp {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_weights *w;
  const long *rt;      // run-time dim values (NULL when the graph has none)
  float **buf;         // buf[v]: value v's floats, NULL until its defining node ran
  const int32_t **len; // len[v]: a lengths input's entries (full lengths when not given)
} interp;

typedef bc_btd btd;

// Reports "internal error: interpreter: node N (Op): ..." and returns
// BC_EINTERNAL: every check below failing means a blockc bug upstream.
__attribute__((format(printf, 3, 4)))
static int node_error(interp *in, const bc_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return bc_error(in->ctx, BC_EINTERNAL, "internal error: interpreter: node %d (%s): %s", n->id,
                  bcI_op_name(n->op), msg);
}

// The actual shape of value v in this run.
static bc_shape shape_now(const interp *in, int v) {
  return bcI_shape_at(in->g, &in->g->vals[v].shape, in->rt);
}

// Allocates a double workspace of n elements, reporting BC_ENOMEM on failure.
static int alloc_doubles(interp *in, int64_t n, double **out) {
  *out = NULL;
  if (n >= 1 && (uint64_t)n <= SIZE_MAX / sizeof(double))
    *out = malloc((size_t)n * sizeof(double));
  if (!*out)
    return bc_error(in->ctx, BC_ENOMEM,
                    "error: interpreter: out of memory (%lld doubles of workspace)", (long long)n);
  return BC_OK;
}

// Allocates the float buffer for value v (which must be valid and not yet
// defined) at its actual size.
static int define_value(interp *in, const bc_node *n, int v, float **out) {
  if (in->buf[v]) return node_error(in, n, "value %%%d is written twice", v);
  bc_shape s = shape_now(in, v);
  int64_t numel = bc_shape_numel(&s);
  if ((uint64_t)numel > SIZE_MAX / sizeof(float) ||
      !(in->buf[v] = malloc((size_t)(numel ? numel : 1) * sizeof(float))))
    return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory (%lld floats for %%%d)",
                    (long long)numel, v);
  *out = in->buf[v];
  return BC_OK;
}

// The operands of one node, fetched and checked.  Every op maps [B, T, D]
// inputs of one shape to outputs of that shape (Linear changes the last
// dim), except Attention, whose kv input (slot 1) has its own sequence
// length and whose slots 2 and 3 are lengths inputs, and the broadcast ops
// (the row's `broadcast`), whose inputs broadcast to their output's shape.
typedef bcR_operands operands;  // ops.h

static int fetch_input(interp *in, const bc_node *n, int k, const bc_shape *ref, operands *o) {
  const bc_graph *g = in->g;
  int v = n->in[k];
  char a[96], b[96];
  if (v < 0 || v >= g->nvals) return node_error(in, n, "input %d is %%%d, not a value", k, v);
  bool attn = n->op == BC_OP_ATTENTION;
  if (attn && k >= 2) {
    if (!bcI_is_lengths(g, v) || !in->len[v])
      return node_error(in, n, "input %d (%%%d) is not a lengths input", k, v);
    o->len[k] = in->len[v];
    return BC_OK;
  }
  if (k == 0 && bcT_def(n->op)->tokens) {  // token ids [B, T] of the output's rows
    bc_shape s = shape_now(in, v);
    if (!bcI_is_tokens(g, v) || !in->len[v] || s.rank != 2 || s.d[0] != o->s.b ||
        s.d[1] != o->s.t)
      return node_error(in, n, "input 0 (%%%d) is not a tokens input of the output's rows", v);
    o->ids = in->len[v];
    return BC_OK;
  }
  if (k == 1 && bcT_def(n->op)->targets) {  // target ids [B, T] of input 0's rows
    bc_shape s = shape_now(in, v);
    if (!bcI_is_tokens(g, v) || !in->len[v] || s.rank != 2 || s.d[0] != o->s.b ||
        s.d[1] != o->s.t)
      return node_error(in, n, "input 1 (%%%d) is not a tokens input of input 0's rows", v);
    o->tgt = in->len[v];
    return BC_OK;
  }
  if (g->vals[v].type != BC_VT_F32) return node_error(in, n, "input %d is a lengths input", k);
  if (!in->buf[v]) return node_error(in, n, "reads %%%d before it is computed", v);
  bc_shape s = shape_now(in, v);
  if (attn && k == 1) {
    if (!bcI_as_btd(&s, &o->kv) || o->kv.b != o->s.b || o->kv.d != o->s.d)
      return node_error(in, n, "kv %%%d has shape %s for queries %s", v,
                        bc_shape_str(&s, a, sizeof a), bc_shape_str(ref, b, sizeof b));
  } else if (bcT_def(n->op)->broadcast ? !bc_shape_broadcasts(&s, ref) : !bc_shape_eq(&s, ref)) {
    return node_error(in, n, "input %%%d has shape %s, expected %s", v,
                      bc_shape_str(&s, a, sizeof a), bc_shape_str(ref, b, sizeof b));
  }
  o->x[k] = in->buf[v];
  o->nel[k] = bc_shape_numel(&s);
  return BC_OK;
}

static int fetch_operands(interp *in, const bc_node *n, operands *o) {
  const bc_graph *g = in->g;
  memset(o, 0, sizeof *o);
  const bc_op_info *info = bcI_op_info(n->op);
  if (!info) return node_error(in, n, "unknown op %d", (int)n->op);
  if (n->nin < info->nin_min || n->nin > info->nin_max || n->nout < 1 || n->nout > info->nout_max)
    return node_error(in, n, "has %d inputs and %d outputs", n->nin, n->nout);
  if (info->nin_min > 0 && (n->in[0] < 0 || n->in[0] >= g->nvals))
    return node_error(in, n, "input 0 is %%%d, not a value", n->in[0]);
  const bc_op_def *def = bcT_def(n->op);
  int rv = def->broadcast || def->tokens ? n->out[0] : n->in[0];  // the shape operands follow
  if (rv < 0 || rv >= g->nvals) return node_error(in, n, "output 0 is %%%d, not a value", rv);
  bc_shape ref = shape_now(in, rv);
  char a[96], b[96];
  if (!bcI_as_btd(&ref, &o->s))
    return node_error(in, n, "input shape %s is not [B, T, D] or [T, D]",
                      bc_shape_str(&ref, a, sizeof a));
  o->kv = o->s;
  for (int k = 0; k < n->nin; k++) {
    if (n->in[k] < 0 && k >= info->nin_min) continue;
    int st = fetch_input(in, n, k, &ref, o);
    if (st) return st;
  }
  // Every op keeps the shape, except Linear, which changes the last dim.
  bc_shape want = ref;
  if (n->op == BC_OP_LINEAR) want.d[want.rank - 1] = n->hidden;
  if (def->scalar) want = (bc_shape){.rank = 0};  // a loss
  for (int k = 0; k < n->nout; k++) {
    int v = n->out[k];
    if (v < 0) continue;  // an optional output nobody reads
    if (v >= g->nvals) return node_error(in, n, "output %d is %%%d, not a value", k, v);
    bc_shape s = shape_now(in, v);
    if (!bc_shape_eq(&s, &want))
      return node_error(in, n, "output %%%d has shape %s, expected %s", v,
                        bc_shape_str(&s, a, sizeof a), bc_shape_str(&want, b, sizeof b));
    int st = define_value(in, n, v, &o->y[k]);
    if (st) return st;
  }
  return BC_OK;
}

// The weights of param slot `slot`, checked against the shape the op needs
// ([d0] when d1 == 0, else [d0, d1]).  *p is NULL for an absent optional
// parameter (slot holds -1).
static int fetch_param(interp *in, const bc_node *n, int slot, int64_t d0, int64_t d1,
                       bool required, const float **p) {
  *p = NULL;
  int id = n->param[slot];
  if (id < 0) return required ? node_error(in, n, "parameter slot %d is missing", slot) : BC_OK;
  if (id >= in->g->nparams || id >= in->w->n)
    return node_error(in, n, "parameter slot %d holds id %d, out of range", slot, id);
  const bc_param *pr = &in->g->params[id];
  bool t = d1 && n->in_out;  // stored (in, out)
  bc_shape want = {.rank = d1 ? 2 : 1, .d = {t ? d1 : d0, t ? d0 : d1}};
  char a[96], b[96];
  if (!bc_shape_eq(&pr->shape, &want))
    return node_error(in, n, "parameter '%s' has shape %s, expected %s", pr->name,
                      bc_shape_str(&pr->shape, a, sizeof a), bc_shape_str(&want, b, sizeof b));
  if (!in->w->p[id]) return node_error(in, n, "no weights loaded for '%s'", pr->name);
  *p = in->w->p[id];
  return BC_OK;
}

// The optional LayerNorm affine pair in slots 0 and 1.
static int fetch_ln_params(interp *in, const bc_node *n, int64_t d, const float **w,
                           const float **b) {
  int st = fetch_param(in, n, 0, d, 0, false, w);
  return st ? st : fetch_param(in, n, 1, d, 0, false, b);
}

// s = alpha*a + beta*b rounded to float (as an Add node would store it),
// then out = LN(s), row by row.  s_out may be NULL when nobody reads the
// sum; row (d floats) is then where it is kept.
// One row normalised by the node's norm: LayerNorm, or RMSNorm (RMSNORM
// and fused ops with rms).
static void norm_row(const bc_node *n, int64_t d, const float *x, const float *w, const float *b,
                     float *out) {
  if (n->op == BC_OP_RMSNORM || n->rms) k_rmsnorm_row(d, x, w, n->offset, n->eps, out);
  else k_layernorm_row(d, x, w, b, n->eps, out);
}

static void add_ln_rows(const bc_node *n, const btd *s, double alpha, const float *a, double beta,
                        const float *b, const float *w, const float *bias, float *out,
                        float *s_out, float *row) {
  int64_t rows = s->b * s->t, d = s->d;
  for (int64_t r = 0; r < rows; r++) {
    float *sr = s_out ? s_out + r * d : row;
    k_add(d, alpha, a + r * d, beta, b + r * d, sr);
    norm_row(n, d, sr, w, bias, out + r * d);
  }
}

// A row of x scaled by sc (ns = 1 or d values) into out, rounded to float as
// the Mul node the fuse-scale pass folded stored it.
static void scale_row(int64_t d, const float *x, const float *sc, int64_t ns, float *out) {
  for (int64_t j = 0; j < d; j++) out[j] = (float)((double)x[j] * (double)sc[ns == d ? j : 0]);
}

// A row of act(x) (opact: 1 + the bc_unary) into out, rounded to float as
// the Act node the fuse-act pass folded stored it.
static void act_row(int64_t d, const float *x, int opact, float *out) {
  for (int64_t j = 0; j < d; j++) out[j] = (float)bcT_unary_f((bc_unary)(opact - 1), (double)x[j]);
}

int bcR_add_scaled_rows(interp *in, const bc_node *n, const operands *o, float *out, float *s_out) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d;
  for (int k = 2; k < 4; k++)
    if (o->x[k] && o->nel[k] != 1 && o->nel[k] != d)
      return node_error(in, n, "scale %d has %lld elements for rows of %lld", k - 2,
                        (long long)o->nel[k], (long long)d);
  if (o->nel[0] != rows * d || o->nel[1] != rows * d)
    return node_error(in, n, "scaled operands of %lld and %lld elements for %lld",
                      (long long)o->nel[0], (long long)o->nel[1], (long long)(rows * d));
  float *tmp = malloc((size_t)(3 * d) * sizeof(float));
  if (!tmp) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
  float *ma = tmp, *mb = tmp + d, *row = tmp + 2 * d;
  const float *w = NULL, *bias = NULL;
  bool norm = n->op == BC_OP_ADD_LN;
  int st = norm ? fetch_ln_params(in, n, d, &w, &bias) : BC_OK;
  for (int64_t r = 0; !st && r < rows; r++) {
    const float *a = o->x[0] + r * d, *b = o->x[1] + r * d;
    if (n->opact[0]) act_row(d, a, n->opact[0], ma), a = ma;
    if (n->opact[1]) act_row(d, b, n->opact[1], mb), b = mb;
    if (o->x[2]) scale_row(d, a, o->x[2], o->nel[2], ma), a = ma;
    if (o->x[3]) scale_row(d, b, o->x[3], o->nel[3], mb), b = mb;
    float *sr = norm ? (s_out ? s_out + r * d : row) : out + r * d;
    k_add(d, n->alpha, a, n->beta, b, sr);
    if (norm) norm_row(n, d, sr, w, bias, out + r * d);
  }
  free(tmp);
  return st;
}

int bcR_run_layernorm(interp *in, const bc_node *n, const operands *o) {
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  for (int64_t r = 0; r < o->s.b * o->s.t; r++)
    norm_row(n, o->s.d, o->x[0] + r * o->s.d, w, b, o->y[0] + r * o->s.d);
  return BC_OK;
}

int bcR_run_add_ln(interp *in, const bc_node *n, const operands *o) {
  if (bcT_add_extra(n)) return bcR_add_scaled_rows(in, n, o, o->y[0], o->y[1]);
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  float *row = malloc((size_t)o->s.d * sizeof(float));
  if (!row) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
  add_ln_rows(n, &o->s, n->alpha, o->x[0], n->beta, o->x[1], w, b, o->y[0], o->y[1], row);
  free(row);
  return BC_OK;
}

// ResiDual's two streams sharing one sublayer output u = in2:
//   out0 = alpha*xd + beta*u         (xd += u)
//   out1 = LN(alpha2*xa + beta2*u)   (xa = LN(xa + u))
// Either output may be absent (-1) if a pass dropped a dead stream.
int bcR_run_dual_add_ln(interp *in, const bc_node *n, const operands *o) {
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  if (o->y[0]) k_add(o->s.b * o->s.t * o->s.d, n->alpha, o->x[0], n->beta, o->x[2], o->y[0]);
  if (o->y[1]) {
    float *row = malloc((size_t)o->s.d * sizeof(float));
    if (!row) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
    add_ln_rows(n, &o->s, n->alpha2, o->x[1], n->beta2, o->x[2], w, b, o->y[1], NULL, row);
    free(row);
  }
  return BC_OK;
}

// The Q, K and V projections of an Attention node: views into one packed
// matrix (slot 0), or separate matrices (slots 0, 4, 6).
static int fetch_attention(interp *in, const bc_node *n, attn_def *A) {
  int64_t d = A->d, dh = A->dh, kvd = A->kv_heads * dh, qd = A->heads * dh;
  bool sep = n->param[4] >= 0;
  bool io = n->in_out;
  const float *w, *b, *wo;
  int st;
  if (n->qk_norm) {
    int64_t wq = n->qk_norm_per_head ? dh : qd, wk = n->qk_norm_per_head ? dh : kvd;
    bool ln = n->qk_norm == 2;
    if ((st = fetch_param(in, n, 8, wq, 0, true, &A->qn)) ||
        (st = fetch_param(in, n, 9, wq, 0, ln, &A->qnb)) ||
        (st = fetch_param(in, n, 10, wk, 0, true, &A->kn)) ||
        (st = fetch_param(in, n, 11, wk, 0, ln, &A->knb)))
      return st;
  }
  if (n->head_scale && (st = fetch_param(in, n, 12, A->heads, 0, true, &A->hs))) return st;
  if ((st = fetch_param(in, n, 2, d, qd, true, &wo)) || (st = fetch_param(in, n, 3, d, 0, false, &A->bo)))
    return st;
  A->o = wfull(wo, d, qd, io);
  if (sep) {
    const float *wk, *wv;
    if ((st = fetch_param(in, n, 0, qd, d, true, &w)) ||
        (st = fetch_param(in, n, 1, qd, 0, false, &A->bq)) ||
        (st = fetch_param(in, n, 4, kvd, d, true, &wk)) ||
        (st = fetch_param(in, n, 5, kvd, 0, false, &A->bk)) ||
        (st = fetch_param(in, n, 6, kvd, d, true, &wv)) ||
        (st = fetch_param(in, n, 7, kvd, 0, false, &A->bv)))
      return st;
    A->q = wfull(w, qd, d, io);
    A->k = wfull(wk, kvd, d, io);
    A->v = wfull(wv, kvd, d, io);
    return BC_OK;
  }
  if (qd != d) return node_error(in, n, "a packed QKV projection with head_dim=%lld", (long long)dh);
  int64_t rows = d + 2 * kvd;
  if ((st = fetch_param(in, n, 0, rows, d, true, &w)) || (st = fetch_param(in, n, 1, rows, 0, false, &b)))
    return st;
  // Packed (out, in): Q, K, V are row blocks; packed (in, out): column blocks.
  int64_t ld = io ? rows : d, step = io ? 1 : d;
  A->q = (wview){w, ld, io};
  A->k = (wview){w + d * step, ld, io};
  A->v = (wview){w + (d + kvd) * step, ld, io};
  A->bq = b;
  A->bk = b ? b + d : NULL;
  A->bv = b ? b + d + kvd : NULL;
  return BC_OK;
}

int bcR_run_attention(interp *in, const bc_node *n, const operands *o) {
  int64_t t = o->s.t, d = o->s.d, sk = o->kv.t;
  if (n->heads < 1 || (!n->head_dim && d % n->heads != 0) || n->kv_heads < 1 ||
      n->heads % n->kv_heads || n->head_dim < 0)
    return node_error(in, n, "heads=%lld kv_heads=%lld for D=%lld", (long long)n->heads,
                      (long long)n->kv_heads, (long long)d);
  bool cross = n->nin > 1 && n->in[1] >= 0;
  if (cross && (n->causal || n->rope)) return node_error(in, n, "causal or rotary cross-attention");
  int64_t dh = bc_head_dim(n, d);
  attn_def A = {.d = d, .heads = n->heads, .kv_heads = n->kv_heads, .dh = dh, .causal = n->causal,
                .rope = n->rope, .rope_theta = n->rope_theta, .qk_norm = n->qk_norm,
                .per_head = n->qk_norm_per_head, .qk_eps = n->qk_norm_eps,
                .softcap = n->softcap, .scale = n->scale, .window = n->window,
                .aq = bcR_act_quant(in)};
  int st = fetch_attention(in, n, &A);
  if (st) return st;
  double *ws;
  if ((st = alloc_doubles(in, attention_ws(t, sk, d, n->heads * dh, n->kv_heads * dh), &ws)))
    return st;
  // Sequences in a batch never see each other: one call per batch element.
  for (int64_t bi = 0; bi < o->s.b; bi++) {
    attn_seq sq = {t, sk, t, sk};
    if (o->len[2]) sq.qvalid = o->len[2][bi];
    if (!cross && o->len[2]) sq.kvalid = o->len[2][bi];
    if (cross && o->len[3]) sq.kvalid = o->len[3][bi];
    const float *x = o->x[0] + bi * t * d;
    const float *kv = cross ? o->x[1] + bi * sk * d : x;
    k_attention(&sq, &A, x, kv, ws, o->y[0] + bi * t * d);
  }
  free(ws);
  return BC_OK;
}

// What op files use (ops.h).
const bc_graph *bcR_interp_graph(const interp *in) { return in->g; }
int bcR_node_error(interp *in, const bc_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return node_error(in, n, "%s", msg);
}
int bcR_fetch_param(interp *in, const bc_node *n, int slot, int64_t d0, int64_t d1, bool required,
                    const float **p) {
  return fetch_param(in, n, slot, d0, d1, required, p);
}
int bcR_alloc_doubles(interp *in, int64_t n, double **out) { return alloc_doubles(in, n, out); }
int bcR_act_quant(const struct bcR_interp *in) {
  int wt = in->g->weight_type;
  return wt == BC_WT_Q8_0 || wt == BC_WT_Q4_0 ? wt : 0;
}

// Each row's blocks of 32 rounded to float and quantized by the runtime's
// own bcrt_quant_act; x then holds d * q exactly (a double holds the
// product of a float and an integer of 8 bits).  A NaN scale makes the
// block NaN, as the kernels' products of it are.
void bcR_quant_x(int aq, int64_t rows, int64_t in, double *x) {
  if (!aq) return;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k0 = 0; k0 < in; k0 += 32) {
      int kb = in - k0 < 32 ? (int)(in - k0) : 32;
      float xf[32];
      signed char q[32];
      double *xr = x + r * in + k0;
      for (int i = 0; i < kb; i++) xf[i] = (float)xr[i];
      double d = bcrt_quant_act(xf, kb, q);
      for (int i = 0; i < kb; i++) xr[i] = d != d ? d : d * q[i];
    }
}

void bcR_k_linear(int64_t rows, int64_t in, int64_t out, const double *x, const wview *W,
                  const float *bias, double *y) {
  k_linear(rows, in, out, x, W, bias, y);
}
wview bcR_wfull(const float *w, int64_t out, int64_t in, bool in_out) { return wfull(w, out, in, in_out); }

static int run_node(interp *in, const bc_node *n) {
  operands o;
  int st = fetch_operands(in, n, &o);
  if (st) return st;
  if (!o.y[0] && n->op != BC_OP_DUAL_ADD_LN)
    return node_error(in, n, "has no output 0");
  const bc_op_def *d = bcT_def(n->op);
  if (!d) return node_error(in, n, "unknown op");
  return d->interp(in, n, &o);
}

// A lengths input's axis: the shortest sequence axis it masks (the query
// axis for lengths=, the kv axis for kv_lengths=), at its actual size.
static int64_t lengths_axis(const bc_graph *g, int v, const long *rt, const char **of) {
  int64_t axis = INT64_MAX;
  for (int i = 0; i < g->nnodes; i++) {
    const bc_node *n = &g->nodes[i];
    if (n->op != BC_OP_ATTENTION) continue;
    for (int k = 2; k < n->nin; k++) {
      if (n->in[k] != v) continue;
      int of_v = k == 2 ? n->in[0] : n->in[1];
      if (of_v < 0) continue;
      bc_shape s = bcI_shape_at(g, &g->vals[of_v].shape, rt);
      if (s.rank >= 2 && s.d[s.rank - 2] < axis) {
        axis = s.d[s.rank - 2];
        *of = g->vals[of_v].name;
      }
    }
  }
  return axis;
}

static int check_lengths(bc_ctx *ctx, const bc_graph *g, int v, const int32_t *len,
                         const long *rt) {
  const char *of = "";
  int64_t axis = lengths_axis(g, v, rt, &of);
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  for (int64_t b = 0; b < s.d[0]; b++) {
    if (len[b] == 0)
      return bc_error(ctx, BC_EINPUT,
                      "error: input '%s': %s[%lld] = 0: batch row %lld has no valid position "
                      "(every row needs a length of at least 1)",
                      g->vals[v].name, g->vals[v].name, (long long)b, (long long)b);
    if (len[b] < 0 || (axis != INT64_MAX && len[b] > axis))
      return bc_error(ctx, BC_EINPUT,
                      "error: input '%s': %s[%lld] = %ld is outside 1..%lld (the sequence "
                      "length of '%s')",
                      g->vals[v].name, g->vals[v].name, (long long)b, (long)len[b],
                      (long long)axis, of);
  }
  return BC_OK;
}

// Token ids: every one in 0..V-1 (V: the vocab of the Embedding reading them).
static int check_tokens(bc_ctx *ctx, const bc_graph *g, int v, const int32_t *ids,
                        const long *rt) {
  if (!ids) return bc_error(ctx, BC_EINPUT, "error: no array for tokens input '%s'", g->vals[v].name);
  int64_t V = bcI_tokens_vocab(g, v);
  if (V < 1) return BC_OK;  // no Embedding reads it (the parser refuses that)
  bc_shape s = bcI_shape_at(g, &g->vals[v].shape, rt);
  int64_t T = s.rank == 2 ? s.d[1] : 1, n = bc_shape_numel(&s), ig = 0;
  bool targets = bcI_tokens_ignore(g, v, &ig);  // CrossEntropy targets: ignore_index too
  for (int64_t k = 0; k < n; k++)
    if ((ids[k] < 0 || ids[k] >= V) && !(targets && ids[k] == ig))
      return bc_error(ctx, BC_EINPUT,
                      "error: input %s: row %lld, position %lld: %s %ld is outside 0..%lld%s",
                      g->vals[v].name, (long long)(k / T), (long long)(k % T),
                      targets ? "target" : "token id", (long)ids[k], (long long)(V - 1),
                      targets ? bc_fmt(ctx, " and is not ignore_index %lld", (long long)ig) : "");
  return BC_OK;
}

int bcR_check_io(bc_ctx *ctx, const bc_graph *g, void *const *io, const long *rt) {
  if (g->nrt > 0 && !rt)
    return bc_error(ctx, BC_EINPUT, "error: the graph has run-time dims but no values were given");
  for (int i = 0; i < g->ndims; i++) {
    const bc_dim *d = &g->dims[i];
    if (d->rt >= 0 && (rt[d->rt] < 1 || rt[d->rt] > d->value))
      return bc_error(ctx, BC_EINPUT, "error: run-time dim %s = %ld is outside 1..%lld (its bound)",
                      d->name, rt[d->rt], (long long)d->value);
  }
  if (!io) return bc_error(ctx, BC_EINPUT, "error: no input or output arrays");
  for (int i = 0; i < g->ninputs + g->noutputs; i++) {
    bool is_in = i < g->ninputs;
    int v = is_in ? g->inputs[i] : g->outputs[i - g->ninputs];
    if (bcI_is_tokens(g, v)) {
      int st = check_tokens(ctx, g, v, io[i], rt);
      if (st) return st;
    } else if (g->vals[v].type == BC_VT_I32) {
      int st = io[i] ? check_lengths(ctx, g, v, io[i], rt) : BC_OK;
      if (st) return st;
    } else if (!io[i]) {
      return bc_error(ctx, BC_EINPUT, "error: no array for %s '%s'", is_in ? "input" : "output",
                      is_in ? g->vals[v].name : g->output_names[i - g->ninputs]);
    }
  }
  return bcT_run_checks(ctx, g, rt, 0, false, "error");  // a learned Positions table's max=
}

// Lengths not given mean full lengths: every row as long as the axis.
static int full_lengths(interp *in, int v, int32_t **out) {
  const char *of = "";
  int64_t axis = lengths_axis(in->g, v, in->rt, &of);
  bc_shape s = shape_now(in, v);
  *out = malloc((size_t)s.d[0] * sizeof **out);
  if (!*out) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
  for (int64_t b = 0; b < s.d[0]; b++) (*out)[b] = (int32_t)(axis == INT64_MAX ? 1 : axis);
  return BC_OK;
}

// Copies every input into its value's buffer (lengths are used in place).
static int load_inputs(interp *in, const int *ins, int nin, void *const *io, int32_t **owned) {
  const bc_graph *g = in->g;
  for (int i = 0; i < nin; i++) {
    int v = ins[i];
    if (v < 0 || v >= g->nvals || g->vals[v].kind != BC_VAL_INPUT)
      return bc_error(in->ctx, BC_EINTERNAL, "internal error: interpreter: graph input %d", v);
    if (bcI_is_tokens(g, v)) {  // ids are read in place (checked: bcR_run skips bcR_check_io)
      int st = check_tokens(in->ctx, g, v, io[i], in->rt);
      if (st) return st;
      in->len[v] = io[i];
      continue;
    }
    if (g->vals[v].type == BC_VT_I32) {
      if (io[i]) in->len[v] = io[i];
      else {
        int st = full_lengths(in, v, &owned[i]);
        if (st) return st;
        in->len[v] = owned[i];
      }
      continue;
    }
    bc_shape s = shape_now(in, v);
    btd b;
    char a[96];
    if (!bcI_as_btd(&s, &b))
      return bc_error(in->ctx, BC_EINTERNAL, "internal error: interpreter: input shape %s",
                      bc_shape_str(&s, a, sizeof a));
    size_t bytes = (size_t)(b.b * b.t * b.d) * sizeof(float);
    if (!(in->buf[v] = malloc(bytes)))
      return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory (%zu bytes)", bytes);
    memcpy(in->buf[v], io[i], bytes);
  }
  return BC_OK;
}

// Copies every output value into the caller's array (an output may be an
// input itself: the same copy).
static int store_outputs(interp *in, const int *outs, int nout, void *const *io) {
  for (int i = 0; i < nout; i++) {
    int v = outs[i];
    if (v < 0 || v >= in->g->nvals || !in->buf[v])
      return bc_error(in->ctx, BC_EINTERNAL, "internal error: interpreter: output %%%d never "
                      "computed", v);
    bc_shape s = shape_now(in, v);
    memcpy(io[i], in->buf[v], (size_t)bc_shape_numel(&s) * sizeof(float));
  }
  return BC_OK;
}

static int run(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, const int *ins, int nin,
               const int *outs, int nout, void *const *io, const long *rt) {
  if (!g || !w || !io || g->nvals < 1)
    return bc_error(ctx, BC_EINTERNAL, "internal error: interpreter: bad arguments");
  if (w->n != g->nparams || (w->n > 0 && !w->p))
    return bc_error(ctx, BC_EINTERNAL,
                    "internal error: interpreter: %d weight arrays for %d params", w->n,
                    g->nparams);
  interp in = {.ctx = ctx, .g = g, .w = w, .rt = rt,
               .buf = calloc((size_t)g->nvals, sizeof(float *)),
               .len = calloc((size_t)g->nvals, sizeof(int32_t *))};
  int32_t **owned = calloc((size_t)(nin ? nin : 1), sizeof *owned);
  int st = in.buf && in.len && owned ? BC_OK
                                     : bc_error(ctx, BC_ENOMEM, "error: interpreter: out of memory");
  if (!st) st = load_inputs(&in, ins, nin, io, owned);
  for (int i = 0; i < g->nnodes && !st; i++) st = run_node(&in, &g->nodes[i]);
  if (!st) st = store_outputs(&in, outs, nout, io + nin);
  for (int v = 0; in.buf && v < g->nvals; v++) free(in.buf[v]);
  for (int i = 0; owned && i < nin; i++) free(owned[i]);
  free(owned);
  free(in.buf);
  free(in.len);
  return st;
}

int bcR_run_io(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
               const long *rt) {
  int st = bcR_check_io(ctx, g, io, rt);
  return st ? st : run(ctx, g, w, g->inputs, g->ninputs, g->outputs, g->noutputs, io, rt);
}

int bcR_run(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, const float *x, float *y) {
  if (!g || !x || !y || g->input < 0 || g->output < 0)
    return bc_error(ctx, BC_EINTERNAL, "internal error: interpreter: bad arguments");
  if (g->nrt > 0 || g->ninputs > 1 || g->noutputs > 1)
    return bc_error(ctx, BC_EINTERNAL, "internal error: interpreter: bcR_run needs one input, "
                    "one output and fixed dims (use bcR_run_io)");
  void *io[2] = {(void *)(uintptr_t)x, y};
  return run(ctx, g, w, &g->input, 1, &g->output, 1, io, NULL);
}
