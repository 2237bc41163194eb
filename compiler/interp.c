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
#include "bc.h"

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

// y[r, o] = sum_k x[r, k] * W[o, k] + bias[o]: PyTorch's Linear, x W^T + b,
// with W stored (out, in) row-major.  Both x's row and W's row are
// contiguous, so every dot product streams through memory.  Four outputs
// are computed side by side only so that four independent sums are in
// flight (a single chain of dependent double adds is latency bound); each
// sum still adds its terms in order k = 0, 1, 2, ...  bias may be NULL.
static void k_linear(int64_t rows, int64_t in, int64_t out, const double *x, const float *W,
                     const float *bias, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * in;
    double *yr = y + r * out;
    int64_t o = 0;
    for (; o + 4 <= out; o += 4) {
      const float *w0 = W + o * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
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
      const float *wo = W + o * in;
      double s = 0;
      for (int64_t k = 0; k < in; k++) s += xr[k] * wo[k];
      yr[o] = s;
    }
    if (bias)
      for (o = 0; o < out; o++) yr[o] += bias[o];
  }
}

// The FFN activations.  relu is written `x < 0 ? 0 : x` so a NaN passes
// through (as torch.relu does) instead of silently becoming 0.
static double k_act(bc_act act, double x) {
  switch (act) {
  case BC_ACT_RELU: return x < 0 ? 0.0 : x;
  case BC_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case BC_ACT_GELU_TANH: {
    const double pi = 3.14159265358979323846;
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
  }
  default: return NAN;  // unreachable: run_ffn checks act first
  }
}

// One attention head for one query row i.  q points at row i's head slice;
// k and v at row 0's head slices, consecutive rows `ld` doubles apart.
// Keys j > jmax are masked: they are skipped, i.e. get exactly zero weight,
// which is what softmax gives for a -inf score, without any inf arithmetic.
// p is scratch for jmax+1 weights; out (dh doubles) receives sum_j p_j v_j.
static void k_attend_row(int64_t jmax, int64_t dh, int64_t ld, const double *q, const double *k,
                         const double *v, double scale, double *p, double *out) {
  for (int64_t j = 0; j <= jmax; j++) {
    const double *kj = k + j * ld;
    double s = 0;
    for (int64_t c = 0; c < dh; c++) s += q[c] * kj[c];
    p[j] = s * scale;
  }
  // Softmax, subtracting the row max so exp never overflows.
  double m = p[0];
  for (int64_t j = 1; j <= jmax; j++)
    if (p[j] > m) m = p[j];
  double z = 0;
  for (int64_t j = 0; j <= jmax; j++) {
    p[j] = exp(p[j] - m);
    z += p[j];
  }
  for (int64_t j = 0; j <= jmax; j++) p[j] /= z;
  // out = P v, walking v row by row so the inner loop is contiguous.
  for (int64_t c = 0; c < dh; c++) out[c] = 0;
  for (int64_t j = 0; j <= jmax; j++) {
    const double *vj = v + j * ld;
    for (int64_t c = 0; c < dh; c++) out[c] += p[j] * vj[c];
  }
}

// Workspace (in doubles) k_attention needs for t rows of width d.
static int64_t attention_ws(int64_t t, int64_t d) { return 6 * t * d + t; }

// Multi-head self-attention over one sequence: x is [t, d] floats, y too.
// PyTorch's nn.MultiheadAttention: qkv = x W_in^T + b_in with W_in rows
// [Wq; Wk; Wv]; head h uses columns [h*dh, (h+1)*dh) of q, k and v;
// heads are concatenated and projected by W_out.  Biases may be NULL.
static void k_attention(int64_t t, int64_t d, int64_t heads, bool causal, const float *x,
                        const float *w_in, const float *b_in, const float *w_out,
                        const float *b_out, double *ws, float *y) {
  double *xd = ws;             // [t, d]   x widened to double
  double *qkv = xd + t * d;    // [t, 3d]  row i: q_i | k_i | v_i
  double *cat = qkv + 3 * t * d; // [t, d] heads concatenated
  double *yd = cat + t * d;    // [t, d]
  double *p = yd + t * d;      // [t]      one row of attention weights
  int64_t dh = d / heads;
  double scale = 1.0 / sqrt((double)dh);
  for (int64_t i = 0; i < t * d; i++) xd[i] = x[i];
  k_linear(t, d, 3 * d, xd, w_in, b_in, qkv);
  for (int64_t h = 0; h < heads; h++) {
    const double *k = qkv + d + h * dh, *v = qkv + 2 * d + h * dh;
    for (int64_t i = 0; i < t; i++) {
      const double *q = qkv + i * 3 * d + h * dh;
      k_attend_row(causal ? i : t - 1, dh, 3 * d, q, k, v, scale, p, cat + i * d + h * dh);
    }
  }
  k_linear(t, d, d, cat, w_out, b_out, yd);
  for (int64_t i = 0; i < t * d; i++) y[i] = (float)yd[i];
}

// Workspace (in doubles) k_ffn needs for t rows, width d, hidden f.
static int64_t ffn_ws(int64_t t, int64_t d, int64_t f) { return 2 * t * d + t * f; }

// Position-wise FFN over t rows: y = act(x W1^T + b1) W2^T + b2, the hidden
// layer kept in double.  Biases may be NULL.
static void k_ffn(int64_t t, int64_t d, int64_t f, bc_act act, const float *x, const float *w1,
                  const float *b1, const float *w2, const float *b2, double *ws, float *y) {
  double *xd = ws;          // [t, d]
  double *hid = xd + t * d; // [t, f]
  double *yd = hid + t * f; // [t, d]
  for (int64_t i = 0; i < t * d; i++) xd[i] = x[i];
  k_linear(t, d, f, xd, w1, b1, hid);
  for (int64_t i = 0; i < t * f; i++) hid[i] = k_act(act, hid[i]);
  k_linear(t, f, d, hid, w2, b2, yd);
  for (int64_t i = 0; i < t * d; i++) y[i] = (float)yd[i];
}

// ---------------------------------------------------------------------------
// The interpreter: checks each node against the graph, then runs a kernel.
// ---------------------------------------------------------------------------

typedef struct interp {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_weights *w;
  float **buf;  // buf[v]: value v's floats, NULL until its defining node ran
} interp;

// A value seen as [B, T, D]: rank 3 as is, rank 2 [T, D] meaning B = 1.
typedef struct btd { int64_t b, t, d; } btd;

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

static bool shape_to_btd(const bc_shape *s, btd *v) {
  if (s->rank != 2 && s->rank != 3) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->d[i] < 1 || s->d[i] > BC_MAX_DIM) return false;
  v->b = s->rank == 3 ? s->d[0] : 1;
  v->t = s->d[s->rank - 2];
  v->d = s->d[s->rank - 1];
  return v->b * v->t * v->d <= BC_MAX_ELEMS;
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
// defined).  The caller checked its shape.
static int define_value(interp *in, const bc_node *n, int v, float **out) {
  if (in->buf[v]) return node_error(in, n, "value %%%d is written twice", v);
  int64_t numel = bc_shape_numel(&in->g->vals[v].shape);
  if ((uint64_t)numel > SIZE_MAX / sizeof(float) ||
      !(in->buf[v] = malloc((size_t)numel * sizeof(float))))
    return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory (%lld floats for %%%d)",
                    (long long)numel, v);
  *out = in->buf[v];
  return BC_OK;
}

// How many inputs an op reads and how many outputs it may name.
static bool op_arity(bc_op op, int *nin, int *nout) {
  switch (op) {
  case BC_OP_ADD: *nin = 2; *nout = 1; return true;
  case BC_OP_LAYERNORM:
  case BC_OP_ATTENTION:
  case BC_OP_FFN:
  case BC_OP_LINEAR: *nin = 1; *nout = 1; return true;
  case BC_OP_ADD_LN: *nin = 2; *nout = 2; return true;
  case BC_OP_DUAL_ADD_LN: *nin = 3; *nout = 2; return true;
  default: return false;
  }
}

// The operands of one node, fetched and checked: every op in bc_op maps
// [B, T, D] inputs to [B, T, D] outputs of the same shape.
typedef struct operands {
  btd s;                            // the common shape
  const float *x[BC_MAX_NODE_IN];   // inputs
  float *y[BC_MAX_NODE_OUT];        // outputs, NULL where the node has none
} operands;

static int fetch_operands(interp *in, const bc_node *n, operands *o) {
  const bc_graph *g = in->g;
  memset(o, 0, sizeof *o);
  int nin, nout;
  if (!op_arity(n->op, &nin, &nout)) return node_error(in, n, "unknown op %d", (int)n->op);
  if (n->nin != nin || n->nout < 1 || n->nout > nout)
    return node_error(in, n, "has %d inputs and %d outputs", n->nin, n->nout);
  if (n->in[0] < 0 || n->in[0] >= g->nvals)
    return node_error(in, n, "input 0 is %%%d, not a value", n->in[0]);
  const bc_shape *ref = &g->vals[n->in[0]].shape;
  char a[96], b[96];
  if (!shape_to_btd(ref, &o->s))
    return node_error(in, n, "input shape %s is not [B, T, D] or [T, D]",
                      bc_shape_str(ref, a, sizeof a));
  for (int k = 0; k < nin; k++) {
    int v = n->in[k];
    if (v < 0 || v >= g->nvals) return node_error(in, n, "input %d is %%%d, not a value", k, v);
    if (!in->buf[v]) return node_error(in, n, "reads %%%d before it is computed", v);
    if (!bc_shape_eq(&g->vals[v].shape, ref))
      return node_error(in, n, "input %%%d has shape %s, expected %s", v,
                        bc_shape_str(&g->vals[v].shape, a, sizeof a),
                        bc_shape_str(ref, b, sizeof b));
    o->x[k] = in->buf[v];
  }
  // Every op keeps the shape, except Linear, which changes the last dim.
  bc_shape want = *ref;
  if (n->op == BC_OP_LINEAR) want.d[want.rank - 1] = n->hidden;
  for (int k = 0; k < n->nout; k++) {
    int v = n->out[k];
    if (v < 0) continue;  // an optional output nobody reads
    if (v >= g->nvals) return node_error(in, n, "output %d is %%%d, not a value", k, v);
    if (!bc_shape_eq(&g->vals[v].shape, &want))
      return node_error(in, n, "output %%%d has shape %s, expected %s", v,
                        bc_shape_str(&g->vals[v].shape, a, sizeof a),
                        bc_shape_str(&want, b, sizeof b));
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
  bc_shape want = {.rank = d1 ? 2 : 1, .d = {d0, d1}};
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
static void add_ln_rows(const btd *s, double alpha, const float *a, double beta, const float *b,
                        const float *w, const float *bias, double eps, float *out, float *s_out,
                        float *row) {
  int64_t rows = s->b * s->t, d = s->d;
  for (int64_t r = 0; r < rows; r++) {
    float *sr = s_out ? s_out + r * d : row;
    k_add(d, alpha, a + r * d, beta, b + r * d, sr);
    k_layernorm_row(d, sr, w, bias, eps, out + r * d);
  }
}

static int run_add(interp *in, const bc_node *n, const operands *o) {
  (void)in;
  k_add(o->s.b * o->s.t * o->s.d, n->alpha, o->x[0], n->beta, o->x[1], o->y[0]);
  return BC_OK;
}

static int run_layernorm(interp *in, const bc_node *n, const operands *o) {
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  for (int64_t r = 0; r < o->s.b * o->s.t; r++)
    k_layernorm_row(o->s.d, o->x[0] + r * o->s.d, w, b, n->eps, o->y[0] + r * o->s.d);
  return BC_OK;
}

static int run_add_ln(interp *in, const bc_node *n, const operands *o) {
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  float *row = malloc((size_t)o->s.d * sizeof(float));
  if (!row) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
  add_ln_rows(&o->s, n->alpha, o->x[0], n->beta, o->x[1], w, b, n->eps, o->y[0], o->y[1], row);
  free(row);
  return BC_OK;
}

// ResiDual's two streams sharing one sublayer output u = in2:
//   out0 = alpha*xd + beta*u         (xd += u)
//   out1 = LN(alpha2*xa + beta2*u)   (xa = LN(xa + u))
// Either output may be absent (-1) if a pass dropped a dead stream.
static int run_dual_add_ln(interp *in, const bc_node *n, const operands *o) {
  const float *w, *b;
  int st = fetch_ln_params(in, n, o->s.d, &w, &b);
  if (st) return st;
  if (o->y[0]) k_add(o->s.b * o->s.t * o->s.d, n->alpha, o->x[0], n->beta, o->x[2], o->y[0]);
  if (o->y[1]) {
    float *row = malloc((size_t)o->s.d * sizeof(float));
    if (!row) return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory");
    add_ln_rows(&o->s, n->alpha2, o->x[1], n->beta2, o->x[2], w, b, n->eps, o->y[1], NULL, row);
    free(row);
  }
  return BC_OK;
}

static int run_attention(interp *in, const bc_node *n, const operands *o) {
  int64_t t = o->s.t, d = o->s.d;
  if (n->heads < 1 || d % n->heads != 0)
    return node_error(in, n, "heads=%lld does not divide D=%lld", (long long)n->heads,
                      (long long)d);
  const float *w_in, *b_in, *w_out, *b_out;
  int st;
  if ((st = fetch_param(in, n, 0, 3 * d, d, true, &w_in)) ||
      (st = fetch_param(in, n, 1, 3 * d, 0, false, &b_in)) ||
      (st = fetch_param(in, n, 2, d, d, true, &w_out)) ||
      (st = fetch_param(in, n, 3, d, 0, false, &b_out)))
    return st;
  double *ws;
  if ((st = alloc_doubles(in, attention_ws(t, d), &ws))) return st;
  // Sequences in a batch never see each other: one call per batch element.
  for (int64_t bi = 0; bi < o->s.b; bi++)
    k_attention(t, d, n->heads, n->causal, o->x[0] + bi * t * d, w_in, b_in, w_out, b_out, ws,
                o->y[0] + bi * t * d);
  free(ws);
  return BC_OK;
}

static int run_ffn(interp *in, const bc_node *n, const operands *o) {
  int64_t t = o->s.t, d = o->s.d, f = n->hidden;
  if (f < 1 || f > BC_MAX_DIM) return node_error(in, n, "hidden=%lld", (long long)f);
  if (n->act < 0 || n->act >= BC_ACT_COUNT) return node_error(in, n, "unknown act %d", (int)n->act);
  const float *w1, *b1, *w2, *b2;
  int st;
  if ((st = fetch_param(in, n, 0, f, d, true, &w1)) ||
      (st = fetch_param(in, n, 1, f, 0, false, &b1)) ||
      (st = fetch_param(in, n, 2, d, f, true, &w2)) ||
      (st = fetch_param(in, n, 3, d, 0, false, &b2)))
    return st;
  double *ws;
  if ((st = alloc_doubles(in, ffn_ws(t, d, f), &ws))) return st;
  // Position-wise, so batches could be one call; per batch keeps the hidden
  // workspace at [T, F] however large B is.
  for (int64_t bi = 0; bi < o->s.b; bi++)
    k_ffn(t, d, f, n->act, o->x[0] + bi * t * d, w1, b1, w2, b2, ws, o->y[0] + bi * t * d);
  free(ws);
  return BC_OK;
}

// y = x W^T + b over every row; x and y are widened to double so the
// shared k_linear kernel accumulates exactly as Attention's projections do.
static int run_linear(interp *in, const bc_node *n, const operands *o) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, k = n->hidden;
  if (k < 1 || k > BC_MAX_DIM) return node_error(in, n, "out=%lld", (long long)k);
  const float *w, *bias;
  int st;
  if ((st = fetch_param(in, n, 0, k, d, true, &w)) || (st = fetch_param(in, n, 1, k, 0, false, &bias)))
    return st;
  double *xd, *yd;
  if ((st = alloc_doubles(in, rows * d, &xd))) return st;
  if ((st = alloc_doubles(in, rows * k, &yd))) {
    free(xd);
    return st;
  }
  for (int64_t i = 0; i < rows * d; i++) xd[i] = o->x[0][i];
  k_linear(rows, d, k, xd, w, bias, yd);
  for (int64_t i = 0; i < rows * k; i++) o->y[0][i] = (float)yd[i];
  free(xd);
  free(yd);
  return BC_OK;
}

static int run_node(interp *in, const bc_node *n) {
  operands o;
  int st = fetch_operands(in, n, &o);
  if (st) return st;
  if (!o.y[0] && n->op != BC_OP_DUAL_ADD_LN)
    return node_error(in, n, "has no output 0");
  switch (n->op) {
  case BC_OP_ADD: return run_add(in, n, &o);
  case BC_OP_LAYERNORM: return run_layernorm(in, n, &o);
  case BC_OP_ATTENTION: return run_attention(in, n, &o);
  case BC_OP_FFN: return run_ffn(in, n, &o);
  case BC_OP_LINEAR: return run_linear(in, n, &o);
  case BC_OP_ADD_LN: return run_add_ln(in, n, &o);
  case BC_OP_DUAL_ADD_LN: return run_dual_add_ln(in, n, &o);
  default: return node_error(in, n, "unknown op");
  }
}

// Copies x into the input value's buffer after checking the graph's ends.
static int load_input(interp *in, const float *x) {
  const bc_graph *g = in->g;
  btd s;
  char a[96];
  if (g->input < 0 || g->input >= g->nvals || g->output < 0 || g->output >= g->nvals)
    return bc_error(in->ctx, BC_EINTERNAL,
                    "internal error: interpreter: graph input %d / output %d", g->input,
                    g->output);
  if (!shape_to_btd(&g->vals[g->input].shape, &s))
    return bc_error(in->ctx, BC_EINTERNAL, "internal error: interpreter: input shape %s",
                    bc_shape_str(&g->vals[g->input].shape, a, sizeof a));
  size_t bytes = (size_t)(s.b * s.t * s.d) * sizeof(float);
  if (!(in->buf[g->input] = malloc(bytes)))
    return bc_error(in->ctx, BC_ENOMEM, "error: interpreter: out of memory (%zu bytes)", bytes);
  memcpy(in->buf[g->input], x, bytes);
  return BC_OK;
}

int bcR_run(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, const float *x, float *y) {
  if (!g || !w || !x || !y || g->nvals < 1)
    return bc_error(ctx, BC_EINTERNAL, "internal error: interpreter: bad arguments");
  if (w->n != g->nparams || (w->n > 0 && !w->p))
    return bc_error(ctx, BC_EINTERNAL,
                    "internal error: interpreter: %d weight arrays for %d params", w->n,
                    g->nparams);
  interp in = {.ctx = ctx, .g = g, .w = w, .buf = calloc((size_t)g->nvals, sizeof(float *))};
  if (!in.buf) return bc_error(ctx, BC_ENOMEM, "error: interpreter: out of memory");
  int st = load_input(&in, x);
  for (int i = 0; i < g->nnodes && !st; i++) st = run_node(&in, &g->nodes[i]);
  if (!st) {
    // The output may be the input itself (an identity graph): same copy.
    const float *out = in.buf[g->output];
    if (!out)
      st = bc_error(ctx, BC_EINTERNAL, "internal error: interpreter: output %%%d never computed",
                    g->output);
    else
      memcpy(y, out, (size_t)bc_shape_numel(&g->vals[g->output].shape) * sizeof(float));
  }
  for (int v = 0; v < g->nvals; v++) free(in.buf[v]);
  free(in.buf);
  return st;
}
