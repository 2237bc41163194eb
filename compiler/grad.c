// grad.c — the reference backward pass: reverse-mode gradients over the IR,
// in double, the oracle for any emitted backward.
//
// Two phases, mirroring what a compiled training step will do:
//
//   bcR_tape_forward   runs the graph forward and keeps what the backward
//                      needs: every value, plus per node the intermediates
//                      (Attention's Q, K, V, softmax weights and concatenated
//                      heads; the FFN's pre-activation; LayerNorm's row mean
//                      and 1/std).
//   bcR_tape_backward  walks the nodes in reverse, seeding the outputs with
//                      dy, and accumulates d(sum(y*dy)) into every value and
//                      parameter it reaches.
//
// Unlike interp.c, the tape keeps values in double (the forward is the same
// maths, so its outputs agree with bcR_run_io to float rounding): the
// gradient is then the exact derivative of one smooth double function, which
// is what finite differences and PyTorch's float64 autograd can be checked
// against to ~1e-10.  Products use OpenBLAS dgemm (double accumulation) so
// a 48-layer stack at D=512 runs in seconds; the weights are widened to
// double one node at a time.  Parameter gradients are accumulated in double
// and rounded to float when the parameter's first user (the last node the
// backward reaches) is done, so only one layer's worth is held in double.
//
// Every op of bc.h has a gradient, fused ones included, so a graph gives the
// same gradients before and after the passes.  A node whose op has none
// would be reported naming the node and its source line.
#include "bc.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Small dense helpers (row-major doubles).
// ---------------------------------------------------------------------------

// y[rows, out] = x[rows, in] W[out, in]^T + b
static void lin_fwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                    const double *b, double *y) {
  if (rows <= 0) return;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out, (int)in, 1.0, x,
              (int)in, W, (int)in, 0.0, y, (int)out);
  if (b)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t o = 0; o < out; o++) y[r * out + o] += b[o];
}

// The backward of lin_fwd: dx += dy W, dW += dy^T x, db += colsum(dy).
// dx and db may be NULL.
static void lin_bwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                    const double *dy, double *dx, double *dW, double *db) {
  if (rows <= 0) return;
  if (dx)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)in, (int)out, 1.0, dy,
                (int)out, W, (int)in, 1.0, dx, (int)in);
  cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)rows, 1.0, dy,
              (int)out, x, (int)in, 1.0, dW, (int)in);
  if (db)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t o = 0; o < out; o++) db[o] += dy[r * out + o];
}

static const double k_pi = 3.14159265358979323846;

static double act_f(bc_act act, double x) {
  switch (act) {
  case BC_ACT_RELU: return x < 0 ? 0.0 : x;
  case BC_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case BC_ACT_GELU_TANH:
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / k_pi) * (x + 0.044715 * x * x * x)));
  default: return NAN;
  }
}

// d act / dx.  relu' is 1 for x > 0 and 0 otherwise (torch's choice at 0).
static double act_df(bc_act act, double x) {
  switch (act) {
  case BC_ACT_RELU: return x > 0 ? 1.0 : 0.0;
  case BC_ACT_GELU:
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * k_pi);
  case BC_ACT_GELU_TANH: {
    double c = sqrt(2.0 / k_pi), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
  }
  default: return NAN;
  }
}

// LayerNorm rows: y = (x - mean) * rstd * w + b; keeps mean and rstd.
static void ln_fwd(int64_t rows, int64_t d, const double *x, const double *w, const double *b,
                   double eps, double *y, double *mean, double *rstd) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * d;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < d; i++) s += xr[i];
    double m = s / (double)d;
    for (int64_t i = 0; i < d; i++) ss += (xr[i] - m) * (xr[i] - m);
    double rs = 1.0 / sqrt(ss / (double)d + eps);
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t i = 0; i < d; i++) {
      double v = (xr[i] - m) * rs;
      y[r * d + i] = v * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
    }
  }
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w;
// dw += dy * xhat, db += dy (dw, db NULL without affine).
static void ln_bwd(int64_t rows, int64_t d, const double *x, const double *mean,
                   const double *rstd, const double *w, const double *dy, double *dx, double *dw,
                   double *db) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * d, *dyr = dy + r * d;
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < d; i++) {
      double xh = (xr[i] - mean[r]) * rstd[r], g = dyr[i] * (w ? w[i] : 1.0);
      sg += g;
      sgx += g * xh;
      if (dw) dw[i] += dyr[i] * xh;
      if (db) db[i] += dyr[i];
    }
    sg /= (double)d;
    sgx /= (double)d;
    for (int64_t i = 0; i < d; i++) {
      double xh = (xr[i] - mean[r]) * rstd[r], g = dyr[i] * (w ? w[i] : 1.0);
      dx[r * d + i] += rstd[r] * (g - sg - xh * sgx);
    }
  }
}

// ---------------------------------------------------------------------------
// The tape
// ---------------------------------------------------------------------------

// What one node keeps for its backward (op-specific; NULL when unused).
typedef struct nsave {
  double *mean, *rstd;       // LayerNorm family: per row
  double *q, *k, *v, *p, *cat; // Attention: [B,t,d], [B,s,d] x2, [B,H,t,s], [B,t,d]
  double *h;                 // FFN: pre-activation [rows, f]
} nsave;

struct bc_tape {
  bc_ctx *ctx;
  const bc_graph *g;
  const bc_weights *w;
  long *rt;                  // copy of the run-time dims (NULL when none)
  double **val;              // val[v]: value v at its actual size
  const int32_t **len;       // lengths inputs (given, or full)
  int32_t **owned;           // full lengths allocated here, per value
  nsave *save;               // per node
};

// A value seen as [B, T, D] (rank 2 [T, D] is B = 1).
typedef struct btd { int64_t b, t, d; } btd;

static bc_shape shape_now(const bc_tape *tp, int v) {
  return bcI_shape_at(tp->g, &tp->g->vals[v].shape, tp->rt);
}

static bool as_btd(const bc_shape *s, btd *o) {
  if (s->rank != 2 && s->rank != 3) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->d[i] < 1 || s->d[i] > BC_MAX_DIM) return false;
  o->b = s->rank == 3 ? s->d[0] : 1;
  o->t = s->d[s->rank - 2];
  o->d = s->d[s->rank - 1];
  return o->b * o->t * o->d <= BC_MAX_ELEMS;
}

__attribute__((format(printf, 3, 4)))
static int node_err(const bc_tape *tp, const bc_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return bc_error(tp->ctx, BC_EINTERNAL, "internal error: grad: node %d (%s, line %d): %s", n->id,
                  bcI_op_name(n->op), n->loc.line, msg);
}

static double *dalloc(bc_ctx *ctx, int64_t n, int *st) {
  double *p = NULL;
  if (n >= 0 && (uint64_t)n < SIZE_MAX / sizeof(double)) p = calloc((size_t)(n ? n : 1), sizeof *p);
  if (!p && !*st)
    *st = bc_error(ctx, BC_ENOMEM, "error: grad: out of memory (%lld doubles)", (long long)n);
  return p;
}

// Param slot `slot` of node n widened to double (NULL if absent and not
// required), its shape checked against [d0] or [d0, d1].
static int param64(const bc_tape *tp, const bc_node *n, int slot, int64_t d0, int64_t d1,
                   bool required, double **out) {
  *out = NULL;
  int id = n->param[slot];
  if (id < 0) return required ? node_err(tp, n, "parameter slot %d is missing", slot) : BC_OK;
  if (id >= tp->g->nparams || id >= tp->w->n || !tp->w->p[id])
    return node_err(tp, n, "parameter slot %d (id %d) has no weights", slot, id);
  bc_shape want = {.rank = d1 ? 2 : 1, .d = {d0, d1}};
  if (!bc_shape_eq(&tp->g->params[id].shape, &want))
    return node_err(tp, n, "parameter '%s' has the wrong shape", tp->g->params[id].name);
  int64_t cnt = d1 ? d0 * d1 : d0;
  int st = BC_OK;
  double *p = dalloc(tp->ctx, cnt, &st);
  if (!p) return st;
  for (int64_t i = 0; i < cnt; i++) p[i] = tp->w->p[id][i];
  *out = p;
  return BC_OK;
}

// The node's four parameter slots widened (absent ones NULL).
typedef struct params64 { double *p[BC_MAX_NODE_PARAMS]; } params64;

static void params_free(params64 *pp) {
  for (int i = 0; i < BC_MAX_NODE_PARAMS; i++) free(pp->p[i]);
}

// Shapes each op expects for its slots (d: model width, f: FFN/Linear width).
static int node_params(const bc_tape *tp, const bc_node *n, int64_t d, params64 *pp) {
  memset(pp, 0, sizeof *pp);
  int64_t f = n->hidden;
  int st = BC_OK;
  switch (n->op) {
  case BC_OP_LAYERNORM: case BC_OP_ADD_LN: case BC_OP_DUAL_ADD_LN:
    if (!(st = param64(tp, n, 0, d, 0, false, &pp->p[0]))) st = param64(tp, n, 1, d, 0, false, &pp->p[1]);
    break;
  case BC_OP_ATTENTION:
    if (!(st = param64(tp, n, 0, 3 * d, d, true, &pp->p[0])) &&
        !(st = param64(tp, n, 1, 3 * d, 0, false, &pp->p[1])) &&
        !(st = param64(tp, n, 2, d, d, true, &pp->p[2])))
      st = param64(tp, n, 3, d, 0, false, &pp->p[3]);
    break;
  case BC_OP_FFN:
    if (!(st = param64(tp, n, 0, f, d, true, &pp->p[0])) &&
        !(st = param64(tp, n, 1, f, 0, false, &pp->p[1])) &&
        !(st = param64(tp, n, 2, d, f, true, &pp->p[2])))
      st = param64(tp, n, 3, d, 0, false, &pp->p[3]);
    break;
  case BC_OP_LINEAR:
    if (!(st = param64(tp, n, 0, f, d, true, &pp->p[0]))) st = param64(tp, n, 1, f, 0, false, &pp->p[1]);
    break;
  default: break;
  }
  if (st) params_free(pp);
  return st;
}

// The operands of one node, checked: float inputs (NULL where absent),
// lengths, the query shape and the kv shape.
typedef struct ops {
  btd s, kv;
  int vin[BC_MAX_NODE_IN];       // value ids of float inputs (-1 absent)
  const int32_t *len[BC_MAX_NODE_IN];
  int vout[BC_MAX_NODE_OUT];     // -1 absent
} ops;

static int node_ops(const bc_tape *tp, const bc_node *n, ops *o) {
  const bc_graph *g = tp->g;
  const bc_op_info *info = bcI_op_info(n->op);
  memset(o, 0, sizeof *o);
  for (int k = 0; k < BC_MAX_NODE_IN; k++) o->vin[k] = -1;
  for (int k = 0; k < BC_MAX_NODE_OUT; k++) o->vout[k] = -1;
  if (!info) return node_err(tp, n, "unknown op %d", (int)n->op);
  if (n->nin < info->nin_min || n->nin > info->nin_max || n->nout < 1 || n->nout > info->nout_max)
    return node_err(tp, n, "has %d inputs and %d outputs", n->nin, n->nout);
  if (n->in[0] < 0 || n->in[0] >= g->nvals) return node_err(tp, n, "bad input 0");
  bc_shape ref = shape_now(tp, n->in[0]);
  if (!as_btd(&ref, &o->s)) return node_err(tp, n, "input is not [B, T, D] or [T, D]");
  o->kv = o->s;
  for (int k = 0; k < n->nin; k++) {
    int v = n->in[k];
    if (v < 0 && k >= info->nin_min) continue;
    if (v < 0 || v >= g->nvals) return node_err(tp, n, "input %d is not a value", k);
    if (n->op == BC_OP_ATTENTION && k >= 2) {
      if (g->vals[v].type != BC_VT_I32 || !tp->len[v])
        return node_err(tp, n, "input %d is not a lengths input", k);
      o->len[k] = tp->len[v];
      continue;
    }
    if (g->vals[v].type != BC_VT_F32 || !tp->val[v])
      return node_err(tp, n, "input %d (%%%d) is not a computed float value", k, v);
    bc_shape s = shape_now(tp, v);
    if (n->op == BC_OP_ATTENTION && k == 1) {
      if (!as_btd(&s, &o->kv) || o->kv.b != o->s.b || o->kv.d != o->s.d)
        return node_err(tp, n, "kv shape does not match the queries");
    } else if (!bc_shape_eq(&s, &ref)) {
      return node_err(tp, n, "input %d has the wrong shape", k);
    }
    o->vin[k] = v;
  }
  bc_shape want = ref;
  if (n->op == BC_OP_LINEAR) want.d[want.rank - 1] = n->hidden;
  for (int k = 0; k < n->nout; k++) {
    int v = n->out[k];
    if (v < 0) continue;
    bc_shape s;
    if (v >= g->nvals || (s = shape_now(tp, v), !bc_shape_eq(&s, &want)))
      return node_err(tp, n, "output %d has the wrong shape", k);
    o->vout[k] = v;
  }
  if (o->vout[0] < 0 && n->op != BC_OP_DUAL_ADD_LN) return node_err(tp, n, "has no output 0");
  return BC_OK;
}

// ---------------------------------------------------------------------------
// Forward, per op
// ---------------------------------------------------------------------------

static int fwd_ln_family(bc_tape *tp, const bc_node *n, const ops *o, const params64 *pp,
                         nsave *sv) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, nel = rows * d;
  int st = BC_OK;
  sv->mean = dalloc(tp->ctx, rows, &st);
  sv->rstd = dalloc(tp->ctx, rows, &st);
  double *s = n->op == BC_OP_LAYERNORM ? NULL : dalloc(tp->ctx, nel, &st);
  if (st) {
    free(s);
    return st;
  }
  const double *x0 = tp->val[o->vin[0]];
  if (n->op == BC_OP_LAYERNORM) {
    ln_fwd(rows, d, x0, pp->p[0], pp->p[1], n->eps, tp->val[o->vout[0]], sv->mean, sv->rstd);
    return BC_OK;
  }
  if (n->op == BC_OP_ADD_LN) {
    const double *x1 = tp->val[o->vin[1]];
    for (int64_t i = 0; i < nel; i++) s[i] = n->alpha * x0[i] + n->beta * x1[i];
    ln_fwd(rows, d, s, pp->p[0], pp->p[1], n->eps, tp->val[o->vout[0]], sv->mean, sv->rstd);
    if (o->vout[1] >= 0) memcpy(tp->val[o->vout[1]], s, (size_t)nel * sizeof *s);
  } else {  // DUAL_ADD_LN
    const double *x1 = tp->val[o->vin[1]], *u = tp->val[o->vin[2]];
    if (o->vout[0] >= 0)
      for (int64_t i = 0; i < nel; i++) tp->val[o->vout[0]][i] = n->alpha * x0[i] + n->beta * u[i];
    if (o->vout[1] >= 0) {
      for (int64_t i = 0; i < nel; i++) s[i] = n->alpha2 * x1[i] + n->beta2 * u[i];
      ln_fwd(rows, d, s, pp->p[0], pp->p[1], n->eps, tp->val[o->vout[1]], sv->mean, sv->rstd);
    }
  }
  free(s);
  return BC_OK;
}

// The attention masks of batch row bi: query rows < qv are computed; keys
// >= kv_valid get zero weight (as interp.c's run_attention).
static void attn_valid(const bc_node *n, const ops *o, int64_t bi, int64_t *qv, int64_t *kvv) {
  bool cross = o->vin[1] >= 0;
  *qv = o->len[2] ? o->len[2][bi] : o->s.t;
  *kvv = o->kv.t;
  if (!cross && o->len[2]) *kvv = o->len[2][bi];
  if (cross && o->len[3]) *kvv = o->len[3][bi];
  (void)n;
}

static int fwd_attention(bc_tape *tp, const bc_node *n, const ops *o, const params64 *pp,
                         nsave *sv) {
  int64_t B = o->s.b, t = o->s.t, d = o->s.d, s = o->kv.t, H = n->heads;
  if (H < 1 || d % H) return node_err(tp, n, "heads=%lld does not divide D=%lld", (long long)H, (long long)d);
  if (o->vin[1] >= 0 && n->causal) return node_err(tp, n, "causal cross-attention");
  int64_t dh = d / H;
  double scale = 1.0 / sqrt((double)dh);
  int st = BC_OK;
  sv->q = dalloc(tp->ctx, B * t * d, &st);
  sv->k = dalloc(tp->ctx, B * s * d, &st);
  sv->v = dalloc(tp->ctx, B * s * d, &st);
  sv->p = dalloc(tp->ctx, B * H * t * s, &st);
  sv->cat = dalloc(tp->ctx, B * t * d, &st);
  if (st) return st;
  const double *X = tp->val[o->vin[0]];
  const double *KV = o->vin[1] >= 0 ? tp->val[o->vin[1]] : X;
  double *Y = tp->val[o->vout[0]];
  const double *bin = pp->p[1];
  for (int64_t bi = 0; bi < B; bi++) {
    int64_t qv, kvv;
    attn_valid(n, o, bi, &qv, &kvv);
    const double *x = X + bi * t * d, *kv = KV + bi * s * d;
    double *q = sv->q + bi * t * d, *k = sv->k + bi * s * d, *v = sv->v + bi * s * d;
    double *cat = sv->cat + bi * t * d;
    lin_fwd(t, d, d, x, pp->p[0], bin, q);
    lin_fwd(s, d, d, kv, pp->p[0] + d * d, bin ? bin + d : NULL, k);
    lin_fwd(s, d, d, kv, pp->p[0] + 2 * d * d, bin ? bin + 2 * d : NULL, v);
    for (int64_t h = 0; h < H; h++) {
      double *P = sv->p + (bi * H + h) * t * s;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)s, (int)dh, scale,
                  q + h * dh, (int)d, k + h * dh, (int)d, 0.0, P, (int)s);
      for (int64_t i = 0; i < t; i++) {
        double *row = P + i * s;
        int64_t jmax = kvv - 1;
        if (n->causal && i < jmax) jmax = i;
        if (i >= qv) jmax = -1;
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j <= jmax; j++) m = row[j] > m ? row[j] : m;
        for (int64_t j = 0; j <= jmax; j++) z += (row[j] = exp(row[j] - m));
        for (int64_t j = 0; j < s; j++) row[j] = j <= jmax ? row[j] / z : 0.0;
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)dh, (int)s, 1.0, P,
                  (int)s, v + h * dh, (int)d, 0.0, cat + h * dh, (int)d);
    }
    double *y = Y + bi * t * d;
    memset(y, 0, (size_t)(t * d) * sizeof *y);
    lin_fwd(qv, d, d, cat, pp->p[2], pp->p[3], y);
  }
  return BC_OK;
}

static int fwd_ffn(bc_tape *tp, const bc_node *n, const ops *o, const params64 *pp, nsave *sv) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, f = n->hidden;
  if (n->act < 0 || n->act >= BC_ACT_COUNT) return node_err(tp, n, "unknown activation");
  int st = BC_OK;
  sv->h = dalloc(tp->ctx, rows * f, &st);
  double *a = dalloc(tp->ctx, rows * f, &st);
  if (!st) {
    lin_fwd(rows, d, f, tp->val[o->vin[0]], pp->p[0], pp->p[1], sv->h);
    for (int64_t i = 0; i < rows * f; i++) a[i] = act_f(n->act, sv->h[i]);
    lin_fwd(rows, f, d, a, pp->p[2], pp->p[3], tp->val[o->vout[0]]);
  }
  free(a);
  return st;
}

static int fwd_node(bc_tape *tp, const bc_node *n) {
  ops o;
  int st = node_ops(tp, n, &o);
  if (st) return st;
  for (int k = 0; k < BC_MAX_NODE_OUT; k++) {
    if (o.vout[k] < 0) continue;
    if (tp->val[o.vout[k]]) return node_err(tp, n, "value %%%d is written twice", o.vout[k]);
    bc_shape s = shape_now(tp, o.vout[k]);
    if (!(tp->val[o.vout[k]] = dalloc(tp->ctx, bc_shape_numel(&s), &st))) return st;
  }
  params64 pp;
  if ((st = node_params(tp, n, o.s.d, &pp))) return st;
  nsave *sv = &tp->save[n->id];
  int64_t nel = o.s.b * o.s.t * o.s.d;
  switch (n->op) {
  case BC_OP_ADD: {
    const double *a = tp->val[o.vin[0]], *b = tp->val[o.vin[1]];
    for (int64_t i = 0; i < nel; i++) tp->val[o.vout[0]][i] = n->alpha * a[i] + n->beta * b[i];
    break;
  }
  case BC_OP_LAYERNORM: case BC_OP_ADD_LN: case BC_OP_DUAL_ADD_LN:
    st = fwd_ln_family(tp, n, &o, &pp, sv);
    break;
  case BC_OP_ATTENTION: st = fwd_attention(tp, n, &o, &pp, sv); break;
  case BC_OP_FFN: st = fwd_ffn(tp, n, &o, &pp, sv); break;
  case BC_OP_LINEAR:
    lin_fwd(o.s.b * o.s.t, o.s.d, n->hidden, tp->val[o.vin[0]], pp.p[0], pp.p[1],
            tp->val[o.vout[0]]);
    break;
  default:
    st = bc_error(tp->ctx, BC_EINPUT, "error: grad: node %d (%s, line %d) has no forward here",
                  n->id, bcI_op_name(n->op), n->loc.line);
  }
  params_free(&pp);
  return st;
}

// ---------------------------------------------------------------------------
// Tape lifetime
// ---------------------------------------------------------------------------

void bcR_tape_free(bc_tape *tp) {
  if (!tp) return;
  for (int v = 0; tp->val && v < tp->g->nvals; v++) free(tp->val[v]);
  for (int v = 0; tp->owned && v < tp->g->nvals; v++) free(tp->owned[v]);
  for (int i = 0; tp->save && i < tp->g->nnodes; i++) {
    nsave *s = &tp->save[i];
    free(s->mean); free(s->rstd); free(s->q); free(s->k); free(s->v); free(s->p);
    free(s->cat); free(s->h);
  }
  free(tp->val);
  free(tp->len);
  free(tp->owned);
  free(tp->save);
  free(tp->rt);
  free(tp);
}

// The length axis of lengths input v: the shortest sequence axis it masks.
static int64_t len_axis(const bc_tape *tp, int v) {
  int64_t axis = INT64_MAX;
  for (int i = 0; i < tp->g->nnodes; i++) {
    const bc_node *n = &tp->g->nodes[i];
    for (int k = 2; n->op == BC_OP_ATTENTION && k < n->nin; k++) {
      int of = k == 2 ? n->in[0] : n->in[1];
      if (n->in[k] != v || of < 0) continue;
      bc_shape s = shape_now(tp, of);
      if (s.rank >= 2 && s.d[s.rank - 2] < axis) axis = s.d[s.rank - 2];
    }
  }
  return axis == INT64_MAX ? 1 : axis;
}

static int load_inputs(bc_tape *tp, void *const *io) {
  const bc_graph *g = tp->g;
  int st = BC_OK;
  for (int i = 0; i < g->ninputs && !st; i++) {
    int v = g->inputs[i];
    if (v < 0 || v >= g->nvals || g->vals[v].kind != BC_VAL_INPUT)
      return bc_error(tp->ctx, BC_EINTERNAL, "internal error: grad: graph input %d", v);
    bc_shape s = shape_now(tp, v);
    if (g->vals[v].type == BC_VT_I32) {
      if (io[i]) {
        tp->len[v] = io[i];
        continue;
      }
      if (!(tp->owned[v] = malloc((size_t)s.d[0] * sizeof(int32_t))))
        return bc_error(tp->ctx, BC_ENOMEM, "error: grad: out of memory");
      for (int64_t b = 0; b < s.d[0]; b++) tp->owned[v][b] = (int32_t)len_axis(tp, v);
      tp->len[v] = tp->owned[v];
      continue;
    }
    btd b;
    if (!as_btd(&s, &b))
      return bc_error(tp->ctx, BC_EINTERNAL, "internal error: grad: input %d is not [B, T, D]", i);
    int64_t nel = bc_shape_numel(&s);
    if (!(tp->val[v] = dalloc(tp->ctx, nel, &st))) return st;
    const float *x = io[i];
    for (int64_t k = 0; k < nel; k++) tp->val[v][k] = x[k];
  }
  return st;
}

int bcR_tape_forward(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                     const long *rt, bc_tape **out) {
  *out = NULL;
  if (!g || !w || w->n != g->nparams || (w->n > 0 && !w->p))
    return bc_error(ctx, BC_EINTERNAL, "internal error: grad: bad arguments");
  int st = bcR_check_io(ctx, g, io, rt);
  if (st) return st;
  bc_tape *tp = calloc(1, sizeof *tp);
  if (!tp) return bc_error(ctx, BC_ENOMEM, "error: grad: out of memory");
  tp->ctx = ctx;
  tp->g = g;
  tp->w = w;
  size_t nv = (size_t)(g->nvals ? g->nvals : 1);
  tp->val = calloc(nv, sizeof *tp->val);
  tp->len = calloc(nv, sizeof *tp->len);
  tp->owned = calloc(nv, sizeof *tp->owned);
  tp->save = calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *tp->save);
  tp->rt = calloc((size_t)(g->nrt ? g->nrt : 1), sizeof *tp->rt);
  if (!tp->val || !tp->len || !tp->owned || !tp->save || !tp->rt)
    st = bc_error(ctx, BC_ENOMEM, "error: grad: out of memory");
  if (!st && g->nrt) memcpy(tp->rt, rt, (size_t)g->nrt * sizeof *rt);
  if (!st && !g->nrt) {
    free(tp->rt);
    tp->rt = NULL;
  }
  if (!st) st = load_inputs(tp, io);
  for (int i = 0; i < g->nnodes && !st; i++) st = fwd_node(tp, &g->nodes[i]);
  for (int i = 0; i < g->noutputs && !st; i++) {
    int v = g->outputs[i];
    if (v < 0 || v >= g->nvals || !tp->val[v]) {
      st = bc_error(ctx, BC_EINTERNAL, "internal error: grad: output %d never computed", i);
      break;
    }
    bc_shape s = shape_now(tp, v);
    float *y = io[g->ninputs + i];
    for (int64_t k = 0, n = bc_shape_numel(&s); k < n; k++) y[k] = (float)tp->val[v][k];
  }
  if (st) {
    bcR_tape_free(tp);
    return st;
  }
  *out = tp;
  return BC_OK;
}

const double *bcR_tape_value(const bc_tape *tp, int v, bc_shape *shape) {
  if (!tp || v < 0 || v >= tp->g->nvals) return NULL;
  if (shape) *shape = shape_now(tp, v);
  return tp->val[v];
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

typedef struct bwd {
  bc_tape *tp;
  double **dv;        // per value: d loss / d value (lazily allocated)
  double **dp;        // per param: d loss / d param in double (lazily allocated)
  int *first_user;    // per param: the lowest node index that uses it
  bc_weights *dw;
} bwd;

// The gradient buffer of value v, allocated (zeroed) on first use.
static double *dval(bwd *b, int v, int *st) {
  if (v < 0) return NULL;
  if (!b->dv[v]) {
    bc_shape s = shape_now(b->tp, v);
    b->dv[v] = dalloc(b->tp->ctx, bc_shape_numel(&s), st);
  }
  return b->dv[v];
}

static double *dparam(bwd *b, const bc_node *n, int slot, int *st) {
  int id = n->param[slot];
  if (id < 0) return NULL;
  if (!b->dp[id]) b->dp[id] = dalloc(b->tp->ctx, bc_shape_numel(&b->tp->g->params[id].shape), st);
  return b->dp[id];
}

static int bwd_ln_family(bwd *b, const bc_node *n, const ops *o, const params64 *pp) {
  bc_tape *tp = b->tp;
  const nsave *sv = &tp->save[n->id];
  int64_t rows = o->s.b * o->s.t, d = o->s.d, nel = rows * d;
  int st = BC_OK;
  double *dw = dparam(b, n, 0, &st), *db = dparam(b, n, 1, &st);
  if (st) return st;
  const double *x0 = tp->val[o->vin[0]];
  if (n->op == BC_OP_LAYERNORM) {
    double *dy = b->dv[o->vout[0]], *dx = dval(b, o->vin[0], &st);
    if (!st && dy) ln_bwd(rows, d, x0, sv->mean, sv->rstd, pp->p[0], dy, dx, dw, db);
    return st;
  }
  // ADD_LN: s = alpha*in0 + beta*in1 -> LN;  DUAL: s = alpha2*in1 + beta2*in2 -> LN
  bool dual = n->op == BC_OP_DUAL_ADD_LN;
  int lnout = dual ? o->vout[1] : o->vout[0];
  int ia = dual ? 1 : 0, ib = dual ? 2 : 1;
  double ca = dual ? n->alpha2 : n->alpha, cb = dual ? n->beta2 : n->beta;
  double *s = dalloc(tp->ctx, nel, &st), *ds = dalloc(tp->ctx, nel, &st);
  double *da = dval(b, o->vin[ia], &st), *dbb = dval(b, o->vin[ib], &st);
  if (!st) {
    const double *xa = tp->val[o->vin[ia]], *xb = tp->val[o->vin[ib]];
    for (int64_t i = 0; i < nel; i++) s[i] = ca * xa[i] + cb * xb[i];
    if (lnout >= 0 && b->dv[lnout])
      ln_bwd(rows, d, s, sv->mean, sv->rstd, pp->p[0], b->dv[lnout], ds, dw, db);
    if (!dual && o->vout[1] >= 0 && b->dv[o->vout[1]])
      for (int64_t i = 0; i < nel; i++) ds[i] += b->dv[o->vout[1]][i];
    for (int64_t i = 0; i < nel; i++) {
      da[i] += ca * ds[i];
      dbb[i] += cb * ds[i];
    }
    if (dual && o->vout[0] >= 0 && b->dv[o->vout[0]]) {  // out0 = alpha*in0 + beta*in2
      double *d0 = dval(b, o->vin[0], &st), *g0 = b->dv[o->vout[0]];
      for (int64_t i = 0; !st && i < nel; i++) {
        d0[i] += n->alpha * g0[i];
        dbb[i] += n->beta * g0[i];
      }
    }
  }
  free(s);
  free(ds);
  return st;
}

static int bwd_attention(bwd *b, const bc_node *n, const ops *o, const params64 *pp) {
  bc_tape *tp = b->tp;
  const nsave *sv = &tp->save[n->id];
  int64_t B = o->s.b, t = o->s.t, d = o->s.d, s = o->kv.t, H = n->heads, dh = d / H;
  double scale = 1.0 / sqrt((double)dh);
  const double *DY = b->dv[o->vout[0]];
  if (!DY) return BC_OK;
  bool cross = o->vin[1] >= 0;
  int st = BC_OK;
  double *dwin = dparam(b, n, 0, &st), *dbin = dparam(b, n, 1, &st);
  double *dwout = dparam(b, n, 2, &st), *dbout = dparam(b, n, 3, &st);
  double *DX = dval(b, o->vin[0], &st), *DKV = cross ? dval(b, o->vin[1], &st) : DX;
  double *dcat = dalloc(tp->ctx, t * d, &st), *dq = dalloc(tp->ctx, t * d, &st);
  double *dk = dalloc(tp->ctx, s * d, &st), *dvv = dalloc(tp->ctx, s * d, &st);
  double *dP = dalloc(tp->ctx, t * s, &st);
  const double *X = tp->val[o->vin[0]], *KV = cross ? tp->val[o->vin[1]] : X;
  for (int64_t bi = 0; bi < B && !st; bi++) {
    int64_t qv, kvv;
    attn_valid(n, o, bi, &qv, &kvv);
    const double *dy = DY + bi * t * d, *x = X + bi * t * d, *kv = KV + bi * s * d;
    const double *q = sv->q + bi * t * d, *k = sv->k + bi * s * d, *v = sv->v + bi * s * d;
    const double *cat = sv->cat + bi * t * d;
    memset(dcat, 0, (size_t)(t * d) * sizeof *dcat);
    lin_bwd(qv, d, d, cat, pp->p[2], dy, dcat, dwout, dbout);
    for (int64_t h = 0; h < H; h++) {
      const double *P = sv->p + (bi * H + h) * t * s;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)s, (int)dh, 1.0,
                  dcat + h * dh, (int)d, v + h * dh, (int)d, 0.0, dP, (int)s);
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s, (int)dh, (int)t, 1.0, P,
                  (int)s, dcat + h * dh, (int)d, 0.0, dvv + h * dh, (int)d);
      for (int64_t i = 0; i < t; i++) {  // softmax backward, in place in dP
        double dot = 0;
        for (int64_t j = 0; j < s; j++) dot += P[i * s + j] * dP[i * s + j];
        for (int64_t j = 0; j < s; j++) dP[i * s + j] = P[i * s + j] * (dP[i * s + j] - dot);
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)dh, (int)s, scale, dP,
                  (int)s, k + h * dh, (int)d, 0.0, dq + h * dh, (int)d);
      cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s, (int)dh, (int)t, scale, dP,
                  (int)s, q + h * dh, (int)d, 0.0, dk + h * dh, (int)d);
    }
    lin_bwd(t, d, d, x, pp->p[0], dq, DX + bi * t * d, dwin, dbin);
    lin_bwd(s, d, d, kv, pp->p[0] + d * d, dk, DKV + bi * s * d, dwin + d * d,
            dbin ? dbin + d : NULL);
    lin_bwd(s, d, d, kv, pp->p[0] + 2 * d * d, dvv, DKV + bi * s * d, dwin + 2 * d * d,
            dbin ? dbin + 2 * d : NULL);
  }
  free(dcat); free(dq); free(dk); free(dvv); free(dP);
  return st;
}

static int bwd_ffn(bwd *b, const bc_node *n, const ops *o, const params64 *pp) {
  bc_tape *tp = b->tp;
  const double *dy = b->dv[o->vout[0]], *h = tp->save[n->id].h;
  if (!dy) return BC_OK;
  int64_t rows = o->s.b * o->s.t, d = o->s.d, f = n->hidden;
  int st = BC_OK;
  double *dw1 = dparam(b, n, 0, &st), *db1 = dparam(b, n, 1, &st);
  double *dw2 = dparam(b, n, 2, &st), *db2 = dparam(b, n, 3, &st);
  double *dx = dval(b, o->vin[0], &st);
  double *a = dalloc(tp->ctx, rows * f, &st), *da = dalloc(tp->ctx, rows * f, &st);
  if (!st) {
    for (int64_t i = 0; i < rows * f; i++) a[i] = act_f(n->act, h[i]);
    lin_bwd(rows, f, d, a, pp->p[2], dy, da, dw2, db2);
    for (int64_t i = 0; i < rows * f; i++) da[i] *= act_df(n->act, h[i]);
    lin_bwd(rows, d, f, tp->val[o->vin[0]], pp->p[0], da, dx, dw1, db1);
  }
  free(a);
  free(da);
  return st;
}

static int bwd_node(bwd *b, const bc_node *n) {
  bc_tape *tp = b->tp;
  ops o;
  int st = node_ops(tp, n, &o);
  if (st) return st;
  bool any = false;
  for (int k = 0; k < BC_MAX_NODE_OUT; k++) any |= o.vout[k] >= 0 && b->dv[o.vout[k]];
  if (!any) return BC_OK;  // nothing downstream depends on this node
  params64 pp;
  if ((st = node_params(tp, n, o.s.d, &pp))) return st;
  switch (n->op) {
  case BC_OP_ADD: {
    int64_t nel = o.s.b * o.s.t * o.s.d;
    double *dy = b->dv[o.vout[0]], *da = dval(b, o.vin[0], &st), *db = dval(b, o.vin[1], &st);
    for (int64_t i = 0; !st && i < nel; i++) {
      da[i] += n->alpha * dy[i];
      db[i] += n->beta * dy[i];
    }
    break;
  }
  case BC_OP_LAYERNORM: case BC_OP_ADD_LN: case BC_OP_DUAL_ADD_LN:
    st = bwd_ln_family(b, n, &o, &pp);
    break;
  case BC_OP_ATTENTION: st = bwd_attention(b, n, &o, &pp); break;
  case BC_OP_FFN: st = bwd_ffn(b, n, &o, &pp); break;
  case BC_OP_LINEAR: {
    int64_t rows = o.s.b * o.s.t;
    double *dw = dparam(b, n, 0, &st), *dbias = dparam(b, n, 1, &st);
    double *dx = dval(b, o.vin[0], &st);
    if (!st)
      lin_bwd(rows, o.s.d, n->hidden, tp->val[o.vin[0]], pp.p[0], b->dv[o.vout[0]], dx, dw, dbias);
    break;
  }
  default:
    st = bc_error(tp->ctx, BC_EINPUT, "error: grad: node %d (%s, line %d) has no gradient",
                  n->id, bcI_op_name(n->op), n->loc.line);
  }
  params_free(&pp);
  return st;
}

// Rounds the double gradient of every param first used by node i into dw.
static void flush_params(bwd *b, int i) {
  const bc_graph *g = b->tp->g;
  for (int p = 0; p < g->nparams; p++) {
    if (b->first_user[p] != i || !b->dp[p]) continue;
    int64_t n = bc_shape_numel(&g->params[p].shape);
    for (int64_t k = 0; k < n; k++) b->dw->p[p][k] = (float)b->dp[p][k];
    free(b->dp[p]);
    b->dp[p] = NULL;
  }
}

static int alloc_dw(bc_ctx *ctx, const bc_graph *g, bc_weights *dw) {
  dw->n = g->nparams;
  dw->p = calloc((size_t)(g->nparams ? g->nparams : 1), sizeof *dw->p);
  if (!dw->p) return bc_error(ctx, BC_ENOMEM, "error: grad: out of memory");
  for (int p = 0; p < g->nparams; p++) {
    int64_t n = bc_shape_numel(&g->params[p].shape);
    if (!(dw->p[p] = calloc((size_t)(n ? n : 1), sizeof(float))))
      return bc_error(ctx, BC_ENOMEM, "error: grad: out of memory for '%s'", g->params[p].name);
  }
  return BC_OK;
}

static int seed_outputs(bwd *b, const float *const *dy) {
  const bc_graph *g = b->tp->g;
  int st = BC_OK;
  for (int i = 0; i < g->noutputs && !st; i++) {
    if (!dy[i]) continue;  // that output does not enter the loss
    int v = g->outputs[i];
    double *d = dval(b, v, &st);
    bc_shape s = shape_now(b->tp, v);
    for (int64_t k = 0, n = bc_shape_numel(&s); !st && k < n; k++) d[k] += dy[i][k];
  }
  return st;
}

int bcR_tape_backward(bc_tape *tp, const float *const *dy, bc_weights *dw, float **dx) {
  const bc_graph *g = tp->g;
  if (!dy || !dw) return bc_error(tp->ctx, BC_EINTERNAL, "internal error: grad: bad arguments");
  memset(dw, 0, sizeof *dw);
  bwd b = {.tp = tp, .dw = dw};
  size_t nv = (size_t)(g->nvals ? g->nvals : 1), np = (size_t)(g->nparams ? g->nparams : 1);
  b.dv = calloc(nv, sizeof *b.dv);
  b.dp = calloc(np, sizeof *b.dp);
  b.first_user = malloc(np * sizeof *b.first_user);
  int st = b.dv && b.dp && b.first_user ? BC_OK
                                         : bc_error(tp->ctx, BC_ENOMEM, "error: grad: out of memory");
  if (!st) st = alloc_dw(tp->ctx, g, dw);
  for (int p = 0; !st && p < g->nparams; p++) b.first_user[p] = -1;
  for (int i = g->nnodes - 1; !st && i >= 0; i--)
    for (int k = 0; k < BC_MAX_NODE_PARAMS; k++) {
      int p = g->nodes[i].param[k];
      if (p >= 0 && p < g->nparams) b.first_user[p] = i;
    }
  if (!st) st = seed_outputs(&b, dy);
  for (int i = g->nnodes - 1; i >= 0 && !st; i--) {
    const bc_node *n = &g->nodes[i];
    st = bwd_node(&b, n);
    flush_params(&b, i);
    // Every reader of the node's outputs comes later: their gradients are complete.
    for (int k = 0; k < n->nout; k++)
      if (n->out[k] >= 0 && n->out[k] < g->nvals) {
        free(b.dv[n->out[k]]);
        b.dv[n->out[k]] = NULL;
      }
  }
  for (int i = 0; i < g->ninputs && !st && dx; i++) {
    int v = g->inputs[i];
    if (!dx[i] || g->vals[v].type != BC_VT_F32) continue;
    bc_shape s = shape_now(tp, v);
    for (int64_t k = 0, n = bc_shape_numel(&s); k < n; k++)
      dx[i][k] = b.dv[v] ? (float)b.dv[v][k] : 0.0f;
  }
  for (size_t v = 0; b.dv && v < nv; v++) free(b.dv[v]);
  for (size_t p = 0; b.dp && p < np; p++) free(b.dp[p]);
  free(b.dv);
  free(b.dp);
  free(b.first_user);
  if (st) bcW_free(dw);
  return st;
}

int bcR_grad(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
             const long *rt, const float *const *dy, bc_weights *dw, float **dx) {
  bc_tape *tp;
  int st = bcR_tape_forward(ctx, g, w, io, rt, &tp);
  if (st) return st;
  st = bcR_tape_backward(tp, dy, dw, dx);
  bcR_tape_free(tp);
  return st;
}
