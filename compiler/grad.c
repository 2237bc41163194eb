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
//
// For an emitted backward (emit.c), the structure to follow: (1) the forward
// keeps what nsave lists per node (or recomputes it), so the planner must keep
// those buffers and every value a backward step reads live until that step;
// (2) the reverse walk needs one gradient buffer per value, live from its
// last reader's backward to its defining node's, accumulated (+=) by every
// reader; (3) each op's backward is the bwd_* function of the same name: per
// Linear-like product three GEMMs (dx += dy W, dW += dy^T x, db += colsum dy),
// Attention's per-head softmax backward, LayerNorm's two row reductions; (4)
// weights are read through `piece`s (packed q|k|v blocks, layout=in_out), so
// the emitter only needs the GEMM transpose flags and leading dimensions
// that piece_at implies instead of copies.
#include "ops.h"

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

// Normalised rows: LayerNorm y = (x - mean) * rstd * w + b, or with rms
// RMSNorm y = x * rstd * w (+ b), rstd = 1/sqrt(mean(x^2) + eps), mean 0;
// keeps mean and rstd per row.
static void ln_fwd(bool rms, int64_t rows, int64_t d, const double *x, const double *w, double off,
                   const double *b, double eps, double *y, double *mean, double *rstd) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * d;
    double s = 0, ss = 0;
    if (!rms)
      for (int64_t i = 0; i < d; i++) s += xr[i];
    double m = s / (double)d;
    for (int64_t i = 0; i < d; i++) ss += (xr[i] - m) * (xr[i] - m);
    double rs = 1.0 / sqrt(ss / (double)d + eps);
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t i = 0; i < d; i++) {
      double v = (xr[i] - m) * rs;
      y[r * d + i] = v * (w ? off + w[i] : 1.0) + (b ? b[i] : 0.0);
    }
  }
}

// With xhat = (x - mean) * rstd and g = dy * w:
//   LayerNorm: dx += rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm:   dx += rstd * (g - xhat * mean(g * xhat))
// dw += dy * xhat, db += dy (dw, db NULL when absent).
static void ln_bwd(bool rms, int64_t rows, int64_t d, const double *x, const double *mean,
                   const double *rstd, const double *w, double off, const double *dy, double *dx,
                   double *dw, double *db) {
  for (int64_t r = 0; r < rows; r++) {
    const double *xr = x + r * d, *dyr = dy + r * d;
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < d; i++) {
      double xh = (xr[i] - mean[r]) * rstd[r], g = dyr[i] * (w ? off + w[i] : 1.0);
      sg += g;
      sgx += g * xh;
      if (dw) dw[i] += dyr[i] * xh;
      if (db) db[i] += dyr[i];
    }
    sg = rms ? 0.0 : sg / (double)d;
    sgx /= (double)d;
    for (int64_t i = 0; i < d; i++) {
      double xh = (xr[i] - mean[r]) * rstd[r], g = dyr[i] * (w ? off + w[i] : 1.0);
      dx[r * d + i] += rstd[r] * (g - sg - xh * sgx);
    }
  }
}

// Rotary positions on one row of nheads heads (interp.c's k_rope_row: Hugging
// Face LLaMA's rotate_half, element j < dh/2 paired with j + dh/2, angle
// pos * theta^(-2j/dh)).  The rotation's transpose is the rotation by -pos,
// which is how the backward undoes it.
static void rope_row(double *x, int64_t nheads, int64_t dh, double pos, double theta) {
  int64_t half = dh / 2;
  for (int64_t h = 0; h < nheads; h++) {
    double *xh = x + h * dh;
    for (int64_t j = 0; j < half; j++) {
      double a = pos * pow(theta, -2.0 * (double)j / (double)dh);
      double c = cos(a), s = sin(a), x0 = xh[j], x1 = xh[j + half];
      xh[j] = x0 * c - x1 * s;
      xh[j + half] = x1 * c + x0 * s;
    }
  }
}

// ---------------------------------------------------------------------------
// The tape
// ---------------------------------------------------------------------------

// What one node keeps for its backward (op-specific; NULL when unused).
typedef struct bcR_nsave {
  double *mean, *rstd;       // LayerNorm family: per row
  double *q, *k, *v, *p, *cat; // Attention: [B,t,d], [B,s,kvd] x2, [B,H,t,s], [B,t,d]
                               // (q and k after QK-norm and rotary positions; cat after
                               // the head scales)
  double *qpre, *kpre;         // Attention with qk_norm: q, k before the norm
  double *tc;                  // Attention with softcap: tanh(s / c) of the scores [B,H,t,s]
  double *catu;                // Attention with head_scale: the heads before their scales
  double *h, *gt;            // FFN: up pre-activation [rows, f]; gate pre-activation (gated)
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
  bc_train_rng rng;          // dropout's generator (training 0: none)
};

typedef bc_btd btd;

static bc_shape shape_now(const bc_tape *tp, int v) {
  return bcI_shape_at(tp->g, &tp->g->vals[v].shape, tp->rt);
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

// ---------------------------------------------------------------------------
// Weights: every matrix the maths reads, in PyTorch's (out, in) orientation,
// cut out of the stored parameter it lives in (a packed Q|K|V projection, an
// (in, out) layout=in_out matrix) and widened to double; its gradient is
// accumulated in the same orientation and scattered back into the stored
// layout afterwards.  So the ops below never see layouts or packing.
// ---------------------------------------------------------------------------

// A piece of a stored parameter: rows r0..r0+rows of a stored (total, cols)
// matrix ((cols, total) when io), or entries r0..r0+rows of a vector
// (cols == 0).  id -1: absent.
typedef struct piece {
  int id;
  int64_t r0, rows, cols, total;
  bool io;
} piece;

#define NPIECE 13
// Piece indices per op (FFN's are in ops/ffn.c).  Attention: Q, K, V, O and their biases;
// norms: weight, bias; Linear: weight, bias.
enum { PA_Q, PA_BQ, PA_K, PA_BK, PA_V, PA_BV, PA_O, PA_BO, PA_QN, PA_BQN, PA_KN, PA_BKN, PA_HS };
enum { PN_W, PN_B };
enum { PL_W, PL_B };

typedef struct bcR_nweights {
  piece pc[NPIECE];
  double *w[NPIECE];   // canonical values (NULL if absent)
  double *g[NPIECE];   // canonical gradients (backward only)
} nweights;

static void nw_free(nweights *nw) {
  for (int i = 0; i < NPIECE; i++) {
    free(nw->w[i]);
    free(nw->g[i]);
  }
}

static int64_t piece_numel(const piece *p) { return p->rows * (p->cols ? p->cols : 1); }

// Element (o, k) of the piece (k = 0 for a vector) in the stored array.
static int64_t piece_at(const piece *p, int64_t o, int64_t k) {
  if (!p->cols) return p->r0 + o;
  return p->io ? k * p->total + p->r0 + o : (p->r0 + o) * p->cols + k;
}

// Sets piece i from param slot `slot`, checking the stored shape: a matrix
// (total, cols) [(cols, total) with io], a vector (total) when cols == 0.
static int set_piece(const bc_tape *tp, const bc_node *n, nweights *nw, int i, int slot,
                     bool required, int64_t r0, int64_t rows, int64_t cols, int64_t total) {
  piece *p = &nw->pc[i];
  *p = (piece){.id = -1};
  int id = n->param[slot];
  if (id < 0) return required ? node_err(tp, n, "parameter slot %d is missing", slot) : BC_OK;
  if (id >= tp->g->nparams || id >= tp->w->n || !tp->w->p[id])
    return node_err(tp, n, "parameter slot %d (id %d) has no weights", slot, id);
  bool io = cols && n->in_out;
  bc_shape want = {.rank = cols ? 2 : 1, .d = {io ? cols : total, io ? total : cols}};
  if (!bc_shape_eq(&tp->g->params[id].shape, &want))
    return node_err(tp, n, "parameter '%s' has the wrong shape", tp->g->params[id].name);
  *p = (piece){.id = id, .r0 = r0, .rows = rows, .cols = cols, .total = total, .io = io};
  return BC_OK;
}

int bcR_attention_pieces(const bc_tape *tp, const bc_node *n, int64_t d, nweights *nw) {
  if (n->heads < 1 || (!n->head_dim && d % n->heads) || n->kv_heads < 1 || n->heads % n->kv_heads)
    return node_err(tp, n, "heads=%lld kv_heads=%lld for D=%lld", (long long)n->heads,
                    (long long)n->kv_heads, (long long)d);
  int64_t dh = bc_head_dim(n, d), qd = n->heads * dh;
  int64_t kvd = n->kv_heads * dh, tot = d + 2 * kvd;
  int st;
  if (n->qk_norm) {
    int64_t wq = n->qk_norm_per_head ? dh : qd, wk = n->qk_norm_per_head ? dh : kvd;
    if ((st = set_piece(tp, n, nw, PA_QN, 8, true, 0, wq, 0, wq)) ||
        (st = set_piece(tp, n, nw, PA_BQN, 9, false, 0, wq, 0, wq)) ||
        (st = set_piece(tp, n, nw, PA_KN, 10, true, 0, wk, 0, wk)) ||
        (st = set_piece(tp, n, nw, PA_BKN, 11, false, 0, wk, 0, wk)))
      return st;
  }
  if (n->head_scale && (st = set_piece(tp, n, nw, PA_HS, 12, true, 0, n->heads, 0, n->heads)))
    return st;
  if ((st = set_piece(tp, n, nw, PA_O, 2, true, 0, d, qd, d)) ||
      (st = set_piece(tp, n, nw, PA_BO, 3, false, 0, d, 0, d)))
    return st;
  if (n->param[4] >= 0) {  // separate q, k, v
    if ((st = set_piece(tp, n, nw, PA_Q, 0, true, 0, qd, d, qd)) ||
        (st = set_piece(tp, n, nw, PA_BQ, 1, false, 0, qd, 0, qd)) ||
        (st = set_piece(tp, n, nw, PA_K, 4, true, 0, kvd, d, kvd)) ||
        (st = set_piece(tp, n, nw, PA_BK, 5, false, 0, kvd, 0, kvd)) ||
        (st = set_piece(tp, n, nw, PA_V, 6, true, 0, kvd, d, kvd)))
      return st;
    return set_piece(tp, n, nw, PA_BV, 7, false, 0, kvd, 0, kvd);
  }
  if (qd != d) return node_err(tp, n, "a packed QKV projection with head_dim=%lld", (long long)dh);
  if ((st = set_piece(tp, n, nw, PA_Q, 0, true, 0, d, d, tot)) ||
      (st = set_piece(tp, n, nw, PA_K, 0, true, d, kvd, d, tot)) ||
      (st = set_piece(tp, n, nw, PA_V, 0, true, d + kvd, kvd, d, tot)) ||
      (st = set_piece(tp, n, nw, PA_BQ, 1, false, 0, d, 0, tot)) ||
      (st = set_piece(tp, n, nw, PA_BK, 1, false, d, kvd, 0, tot)))
    return st;
  return set_piece(tp, n, nw, PA_BV, 1, false, d + kvd, kvd, 0, tot);
}

// The pieces of the ops with no weights, the norms and Linear.
int bcR_no_pieces(const bc_tape *tp, const bc_node *n, int64_t d, nweights *nw) {
  (void)tp, (void)n, (void)d, (void)nw;
  return BC_OK;
}

int bcR_norm_pieces(const bc_tape *tp, const bc_node *n, int64_t d, nweights *nw) {
  int st;
  if (!(st = set_piece(tp, n, nw, PN_W, 0, false, 0, d, 0, d)))
    st = set_piece(tp, n, nw, PN_B, 1, false, 0, d, 0, d);
  return st;
}

// The node's pieces, widened to double.
static int node_weights(const bc_tape *tp, const bc_node *n, int64_t d, nweights *nw) {
  memset(nw, 0, sizeof *nw);
  for (int i = 0; i < NPIECE; i++) nw->pc[i].id = -1;
  int st = BC_OK;
  const bc_op_def *def = bcT_def(n->op);
  if (!def) return node_err(tp, n, "unknown op");
  st = def->ref_weights(tp, n, d, nw);
  for (int i = 0; i < NPIECE && !st; i++) {
    const piece *p = &nw->pc[i];
    if (p->id < 0) continue;
    if (!(nw->w[i] = dalloc(tp->ctx, piece_numel(p), &st))) break;
    const float *src = tp->w->p[p->id];
    int64_t cols = p->cols ? p->cols : 1;
    for (int64_t o = 0; o < p->rows; o++)
      for (int64_t k = 0; k < cols; k++) nw->w[i][o * cols + k] = src[piece_at(p, o, k)];
  }
  if (st) nw_free(nw);
  return st;
}

// The operands of one node, checked: float inputs (NULL where absent),
// lengths, the query shape and the kv shape.
typedef bcR_ops ops;  // ops.h (kv and len: Attention)

static int node_ops(const bc_tape *tp, const bc_node *n, ops *o) {
  const bc_graph *g = tp->g;
  const bc_op_info *info = bcI_op_info(n->op);
  memset(o, 0, sizeof *o);
  for (int k = 0; k < BC_MAX_NODE_IN; k++) o->vin[k] = -1;
  for (int k = 0; k < BC_MAX_NODE_OUT; k++) o->vout[k] = -1;
  if (!info) return node_err(tp, n, "unknown op %d", (int)n->op);
  if (n->nin < info->nin_min || n->nin > info->nin_max || n->nout < 1 || n->nout > info->nout_max)
    return node_err(tp, n, "has %d inputs and %d outputs", n->nin, n->nout);
  if (info->nin_min > 0 && (n->in[0] < 0 || n->in[0] >= g->nvals))
    return node_err(tp, n, "bad input 0");
  bool bcast = bcT_def(n->op)->broadcast;  // inputs broadcast to output 0 (ops.h)
  bool tokens = bcT_def(n->op)->tokens;    // input 0: token ids of output 0's rows
  int rv = bcast || tokens ? n->out[0] : n->in[0];
  if (rv < 0 || rv >= g->nvals) return node_err(tp, n, "bad output 0");
  bc_shape ref = shape_now(tp, rv);
  if (!bcI_as_btd(&ref, &o->s)) return node_err(tp, n, "input is not [B, T, D] or [T, D]");
  o->kv = o->s;
  for (int k = 0; k < n->nin; k++) {
    int v = n->in[k];
    if (v < 0 && k >= info->nin_min) continue;
    if (v < 0 || v >= g->nvals) return node_err(tp, n, "input %d is not a value", k);
    if (n->op == BC_OP_ATTENTION && k >= 2) {
      if (!bcI_is_lengths(g, v) || !tp->len[v])
        return node_err(tp, n, "input %d is not a lengths input", k);
      o->len[k] = tp->len[v];
      continue;
    }
    if (k == 0 && tokens) {
      bc_shape s = shape_now(tp, v);
      if (!bcI_is_tokens(g, v) || !tp->len[v] || s.rank != 2 || s.d[0] != o->s.b ||
          s.d[1] != o->s.t)
        return node_err(tp, n, "input 0 is not a tokens input of the output's rows");
      o->ids = tp->len[v];
      continue;
    }
    if (k == 1 && bcT_def(n->op)->targets) {  // target ids of input 0's rows
      bc_shape s = shape_now(tp, v);
      if (!bcI_is_tokens(g, v) || !tp->len[v] || s.rank != 2 || s.d[0] != o->s.b ||
          s.d[1] != o->s.t)
        return node_err(tp, n, "input 1 is not a tokens input of input 0's rows");
      o->tgt = tp->len[v];
      continue;
    }
    if (g->vals[v].type != BC_VT_F32 || !tp->val[v])
      return node_err(tp, n, "input %d (%%%d) is not a computed float value", k, v);
    bc_shape s = shape_now(tp, v);
    if (n->op == BC_OP_ATTENTION && k == 1) {
      if (!bcI_as_btd(&s, &o->kv) || o->kv.b != o->s.b || o->kv.d != o->s.d)
        return node_err(tp, n, "kv shape does not match the queries");
    } else if (bcast ? !bc_shape_broadcasts(&s, &ref) : !bc_shape_eq(&s, &ref)) {
      return node_err(tp, n, "input %d has the wrong shape", k);
    }
    o->vin[k] = v;
    o->nel[k] = bc_shape_numel(&s);
  }
  bc_shape want = ref;
  if (n->op == BC_OP_LINEAR) want.d[want.rank - 1] = n->hidden;
  if (bcT_def(n->op)->scalar) want = (bc_shape){.rank = 0};  // a loss
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

static bool is_rms(const bc_node *n) { return n->op == BC_OP_RMSNORM || n->rms; }

int bcR_fwd_ln_family(bc_tape *tp, const bc_node *n, const ops *o, const nweights *nw,
                         nsave *sv) {
  int64_t rows = o->s.b * o->s.t, d = o->s.d, nel = rows * d;
  int st = BC_OK;
  bool plain = n->op == BC_OP_LAYERNORM || n->op == BC_OP_RMSNORM;
  sv->mean = dalloc(tp->ctx, rows, &st);
  sv->rstd = dalloc(tp->ctx, rows, &st);
  double *s = plain ? NULL : dalloc(tp->ctx, nel, &st);
  const double *w = nw->w[PN_W], *b = nw->w[PN_B];
  if (st) {
    free(s);
    return st;
  }
  const double *x0 = tp->val[o->vin[0]];
  if (plain) {
    ln_fwd(is_rms(n), rows, d, x0, w, n->offset, b, n->eps, tp->val[o->vout[0]], sv->mean, sv->rstd);
    return BC_OK;
  }
  if (n->op == BC_OP_ADD_LN) {
    const double *x1 = tp->val[o->vin[1]];
    if (bcT_add_extra(n)) {
      if ((st = bcR_scaled_sum(tp, n, o, s))) {
        free(s);
        return st;
      }
    } else
      for (int64_t i = 0; i < nel; i++) s[i] = n->alpha * x0[i] + n->beta * x1[i];
    ln_fwd(is_rms(n), rows, d, s, w, n->offset, b, n->eps, tp->val[o->vout[0]], sv->mean, sv->rstd);
    if (o->vout[1] >= 0) memcpy(tp->val[o->vout[1]], s, (size_t)nel * sizeof *s);
  } else {  // DUAL_ADD_LN
    const double *x1 = tp->val[o->vin[1]], *u = tp->val[o->vin[2]];
    if (o->vout[0] >= 0)
      for (int64_t i = 0; i < nel; i++) tp->val[o->vout[0]][i] = n->alpha * x0[i] + n->beta * u[i];
    if (o->vout[1] >= 0) {
      for (int64_t i = 0; i < nel; i++) s[i] = n->alpha2 * x1[i] + n->beta2 * u[i];
      ln_fwd(is_rms(n), rows, d, s, w, n->offset, b, n->eps, tp->val[o->vout[1]], sv->mean, sv->rstd);
    }
  }
  free(s);
  return BC_OK;
}

// The attention masks of batch row bi: query rows < qv are computed; keys
// >= kv_valid get zero weight (as interp.c's run_attention).
static void attn_valid(const ops *o, int64_t bi, int64_t *qv, int64_t *kvv) {
  bool cross = o->vin[1] >= 0;
  *qv = o->len[2] ? o->len[2][bi] : o->s.t;
  *kvv = o->kv.t;
  if (!cross && o->len[2]) *kvv = o->len[2][bi];
  if (cross && o->len[3]) *kvv = o->len[3][bi];
}

// Attention dropout=p in training: out[i] = in[i] * the mask factor of
// element off + i of the weights [B, H, T, S] (out may be in).
static void attn_drop(unsigned long long key, double p, int64_t off, int64_t n, const double *in,
                      double *out) {
  for (int64_t i = 0; i < n; i++) out[i] = in[i] * bcR_drop_factor(key, p, off + i);
}

// The factor of q.k: scale=, or 1/sqrt(dh).
static double att_scale(const bc_node *n, int64_t dh) {
  return n->scale > 0 ? n->scale : 1.0 / sqrt((double)dh);
}

// QK-norm of one batch row's q [t, d] (d: the query width H*dh) and k [s, kvd] in place: per head
// (segments of dh) or over each row, RMSNorm (qk_norm 1) or LayerNorm (2).
static int qk_norm_fwd(bc_tape *tp, const bc_node *n, int64_t t, int64_t s, int64_t d,
                       int64_t kvd, double *const *W, double *q, double *k) {
  int64_t dh = d / n->heads, wq = n->qk_norm_per_head ? dh : d, wk = n->qk_norm_per_head ? dh : kvd;
  int64_t rq = t * d / wq, rk = s * kvd / wk, rmax = rq > rk ? rq : rk;
  int st = BC_OK;
  double *mean = dalloc(tp->ctx, rmax, &st), *rstd = dalloc(tp->ctx, rmax, &st);
  if (!st) {
    bool rms = n->qk_norm == 1;
    ln_fwd(rms, rq, wq, q, W[PA_QN], 0.0, W[PA_BQN], n->qk_norm_eps, q, mean, rstd);
    ln_fwd(rms, rk, wk, k, W[PA_KN], 0.0, W[PA_BKN], n->qk_norm_eps, k, mean, rstd);
  }
  free(mean);
  free(rstd);
  return st;
}

// Its backward: dq, dk (gradients of the normalised q and k) become the
// gradients of the projections in place; the weights' gradients accumulate.
static int qk_norm_bwd(bc_ctx *ctx, const bc_node *n, int64_t t, int64_t s, int64_t d,
                       int64_t kvd, const nweights *nw, const double *qpre, const double *kpre,
                       double *dq, double *dk) {
  int64_t dh = d / n->heads, wq = n->qk_norm_per_head ? dh : d, wk = n->qk_norm_per_head ? dh : kvd;
  int64_t rq = t * d / wq, rk = s * kvd / wk, rmax = rq > rk ? rq : rk;
  int st = BC_OK;
  double *mean = dalloc(ctx, rmax, &st), *rstd = dalloc(ctx, rmax, &st);
  double *y = dalloc(ctx, t * d > s * kvd ? t * d : s * kvd, &st);
  double *dx = dalloc(ctx, t * d > s * kvd ? t * d : s * kvd, &st);
  bool rms = n->qk_norm == 1;
  for (int pass = 0; pass < 2 && !st; pass++) {
    int64_t rows = pass ? rk : rq, w = pass ? wk : wq, nel = pass ? s * kvd : t * d;
    const double *x = pass ? kpre : qpre;
    double *g = pass ? dk : dq;
    int iw = pass ? PA_KN : PA_QN, ib = pass ? PA_BKN : PA_BQN;
    ln_fwd(rms, rows, w, x, nw->w[iw], 0.0, nw->w[ib], n->qk_norm_eps, y, mean, rstd);
    memset(dx, 0, (size_t)nel * sizeof *dx);
    ln_bwd(rms, rows, w, x, mean, rstd, nw->w[iw], 0.0, g, dx, nw->g[iw], nw->g[ib]);
    memcpy(g, dx, (size_t)nel * sizeof *dx);
  }
  free(mean); free(rstd); free(y); free(dx);
  return st;
}

// Q [t, d], K and V [s, kvd] (rows ld = kvd); query head h reads kv head
// h / group (grouped-query attention).  P: [H, t, s] softmax weights.
int bcR_fwd_attention(bc_tape *tp, const bc_node *n, const ops *o, const nweights *nw,
                         nsave *sv) {
  int64_t B = o->s.b, t = o->s.t, d = o->s.d, s = o->kv.t, H = n->heads;
  if (o->vin[1] >= 0 && (n->causal || n->rope))
    return node_err(tp, n, "causal or rotary cross-attention");
  int64_t dh = bc_head_dim(n, d), qd = H * dh, kvd = n->kv_heads * dh, group = H / n->kv_heads;
  double scale = att_scale(n, dh);
  int st = BC_OK;
  if (n->qk_norm) {
    sv->qpre = dalloc(tp->ctx, B * t * qd, &st);
    sv->kpre = dalloc(tp->ctx, B * s * kvd, &st);
  }
  if (n->softcap > 0) sv->tc = dalloc(tp->ctx, B * H * t * s, &st);
  if (n->head_scale) sv->catu = dalloc(tp->ctx, B * t * qd, &st);
  sv->q = dalloc(tp->ctx, B * t * qd, &st);
  sv->k = dalloc(tp->ctx, B * s * kvd, &st);
  sv->v = dalloc(tp->ctx, B * s * kvd, &st);
  sv->p = dalloc(tp->ctx, B * H * t * s, &st);
  sv->cat = dalloc(tp->ctx, B * t * qd, &st);
  unsigned long long key = 0;
  bool drop = bcR_dropping(tp, n, n->dropout, &key);
  double *Pd = drop ? dalloc(tp->ctx, t * s, &st) : NULL;  // the dropped weights of one head
  if (st) {
    free(Pd);
    return st;
  }
  const double *X = tp->val[o->vin[0]];
  const double *KV = o->vin[1] >= 0 ? tp->val[o->vin[1]] : X;
  double *const *W = nw->w;
  for (int64_t bi = 0; bi < B; bi++) {
    int64_t qv, kvv;
    attn_valid(o, bi, &qv, &kvv);
    const double *x = X + bi * t * d, *kv = KV + bi * s * d;
    double *q = sv->q + bi * t * qd, *k = sv->k + bi * s * kvd, *v = sv->v + bi * s * kvd;
    double *cat = sv->cat + bi * t * qd;
    lin_fwd(t, d, qd, x, W[PA_Q], W[PA_BQ], q);
    lin_fwd(s, d, kvd, kv, W[PA_K], W[PA_BK], k);
    lin_fwd(s, d, kvd, kv, W[PA_V], W[PA_BV], v);
    if (n->qk_norm) {  // before the rotations; q and k as projected are kept
      memcpy(sv->qpre + bi * t * qd, q, (size_t)(t * qd) * sizeof *q);
      memcpy(sv->kpre + bi * s * kvd, k, (size_t)(s * kvd) * sizeof *k);
      st = qk_norm_fwd(tp, n, t, s, qd, kvd, W, q, k);
      if (st) break;
    }
    if (n->rope) {
      for (int64_t i = 0; i < t; i++) rope_row(q + i * qd, H, dh, (double)i, n->rope_theta);
      for (int64_t j = 0; j < s; j++) rope_row(k + j * kvd, n->kv_heads, dh, (double)j, n->rope_theta);
    }
    for (int64_t h = 0; h < H; h++) {
      double *P = sv->p + (bi * H + h) * t * s;
      int64_t gk = (h / group) * dh;
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)s, (int)dh, scale,
                  q + h * dh, (int)qd, k + gk, (int)kvd, 0.0, P, (int)s);
      for (int64_t i = 0; i < t; i++) {
        double *row = P + i * s;
        int64_t jmax = kvv - 1;
        if (n->causal && i < jmax) jmax = i;
        if (i >= qv) jmax = -1;
        int64_t jmin = n->window > 0 && i - n->window + 1 > 0 ? i - n->window + 1 : 0;
        if (n->softcap > 0) {  // s -> c tanh(s / c), tanh kept for the backward
          double *tcr = sv->tc + ((bi * H + h) * t + i) * s;
          for (int64_t j = 0; j < s; j++) {
            tcr[j] = tanh(row[j] / n->softcap);
            row[j] = n->softcap * tcr[j];
          }
        }
        double m = -INFINITY, z = 0;
        for (int64_t j = jmin; j <= jmax; j++) m = row[j] > m ? row[j] : m;
        for (int64_t j = jmin; j <= jmax; j++) z += (row[j] = exp(row[j] - m));
        for (int64_t j = 0; j < s; j++) row[j] = j >= jmin && j <= jmax ? row[j] / z : 0.0;
      }
      if (drop) attn_drop(key, n->dropout, (bi * H + h) * t * s, t * s, P, Pd);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)dh, (int)s, 1.0,
                  drop ? Pd : P, (int)s, v + gk, (int)kvd, 0.0, cat + h * dh, (int)qd);
    }
    if (n->head_scale) {  // NormFormer: head h times head_scale[h]
      memcpy(sv->catu + bi * t * qd, cat, (size_t)(t * qd) * sizeof *cat);
      for (int64_t i = 0; i < t; i++)
        for (int64_t c = 0; c < qd; c++) cat[i * qd + c] *= W[PA_HS][c / dh];
    }
    double *y = tp->val[o->vout[0]] + bi * t * d;
    memset(y, 0, (size_t)(t * d) * sizeof *y);
    lin_fwd(qv, qd, d, cat, W[PA_O], W[PA_BO], y);
  }
  free(Pd);
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
  nweights nw;
  if ((st = node_weights(tp, n, o.s.d, &nw))) return st;
  nsave *sv = &tp->save[n->id];
  const bc_op_def *def = bcT_def(n->op);
  st = def ? def->ref_fwd(tp, n, &o, &nw, sv) : node_err(tp, n, "unknown op");
  nw_free(&nw);
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
    free(s->cat); free(s->h); free(s->gt);
    free(s->qpre); free(s->kpre); free(s->tc); free(s->catu);
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
      if (io[i] || bcI_is_tokens(g, v)) {  // token ids: checked non-NULL by bcR_check_io
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
    if (!bcI_as_btd(&s, &b))
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
  return bcR_tape_forward_ex(ctx, g, w, io, rt, NULL, out);
}

int bcR_tape_forward_ex(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                        const long *rt, const bc_train_rng *rng, bc_tape **out) {
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
  if (rng) tp->rng = *rng;
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

typedef struct bcR_bwd {
  bc_tape *tp;
  double **dv;        // per value: d loss / d value (lazily allocated)
  double **dp;        // per param: d loss / d param in double (lazily allocated)
  int *first_user;    // per param: the lowest node index that uses it
  bc_weights *dw;
} bwd;

// The gradient buffer of value v, allocated (zeroed) on first use.
static double *dval(bwd *b, int v, int *st);
double *bcR_tape_val(bc_tape *tp, int v) { return tp->val[v]; }
const double *bcR_nw_w(const nweights *nw, int i) { return nw->w[i]; }
double *bcR_nw_g(const nweights *nw, int i) { return nw->g[i]; }
int bcR_set_piece(const bc_tape *tp, const bc_node *n, nweights *nw, int i, int slot,
                  bool required, int64_t r0, int64_t rows, int64_t cols, int64_t total) {
  return set_piece(tp, n, nw, i, slot, required, r0, rows, cols, total);
}
const bc_train_rng *bcR_tape_rng(const bc_tape *tp) { return &tp->rng; }
int bcR_node_err(const bc_tape *tp, const bc_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return node_err(tp, n, "%s", msg);
}
void bcR_lin_fwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                 const double *b, double *y) {
  lin_fwd(rows, in, out, x, W, b, y);
}
void bcR_lin_bwd(int64_t rows, int64_t in, int64_t out, const double *x, const double *W,
                 const double *dy, double *dx, double *dW, double *db) {
  lin_bwd(rows, in, out, x, W, dy, dx, dW, db);
}
bc_tape *bcR_bwd_tape(bwd *b) { return b->tp; }
const bc_graph *bcR_tape_graph(const bc_tape *tp) { return tp->g; }

// The scaled operands' checks: a and b of rows x d, scales of 1 or d values.
static int scaled_ok(const bc_tape *tp, const bc_node *n, const ops *o) {
  int64_t d = o->s.d, nel = o->s.b * o->s.t * d;
  if (o->nel[0] != nel || o->nel[1] != nel) return node_err(tp, n, "scaled operands differ in shape");
  for (int k = 2; k < 4; k++)
    if (o->vin[k] >= 0 && o->nel[k] != 1 && o->nel[k] != d)
      return node_err(tp, n, "scale %d has %lld elements", k - 2, (long long)o->nel[k]);
  return BC_OK;
}

int bcR_scaled_sum(bc_tape *tp, const bc_node *n, const ops *o, double *out) {
  int st = scaled_ok(tp, n, o);
  if (st) return st;
  int64_t d = o->s.d, nel = o->s.b * o->s.t * d;
  const double *a = tp->val[o->vin[0]], *b = tp->val[o->vin[1]];
  const double *sa = o->vin[2] >= 0 ? tp->val[o->vin[2]] : NULL;
  const double *sb = o->vin[3] >= 0 ? tp->val[o->vin[3]] : NULL;
  int64_t na = o->nel[2] == d ? d : 1, nb = o->nel[3] == d ? d : 1;
  for (int64_t i = 0; i < nel; i++) {
    double ma = n->opact[0] ? bcT_unary_f((bc_unary)(n->opact[0] - 1), a[i]) : a[i];
    double mb = n->opact[1] ? bcT_unary_f((bc_unary)(n->opact[1] - 1), b[i]) : b[i];
    if (sa) ma *= sa[na == 1 ? 0 : i % d];
    if (sb) mb *= sb[nb == 1 ? 0 : i % d];
    out[i] = n->alpha * ma + n->beta * mb;
  }
  return BC_OK;
}

int bcR_scaled_sum_bwd(bwd *bw, const bc_node *n, const ops *o, const double *ds) {
  bc_tape *tp = bw->tp;
  int st = scaled_ok(tp, n, o);
  if (st || !ds) return st;
  int64_t d = o->s.d, nel = o->s.b * o->s.t * d;
  for (int side = 0; side < 2; side++) {
    int vx = o->vin[side], vs = o->vin[2 + side];
    double k = side ? n->beta : n->alpha;
    const double *x = tp->val[vx], *sc = vs >= 0 ? tp->val[vs] : NULL;
    int64_t ns = vs >= 0 && o->nel[2 + side] == d ? d : 1;
    double *dx = dval(bw, vx, &st), *dsc = vs >= 0 ? dval(bw, vs, &st) : NULL;
    int ua = n->opact[side];
    for (int64_t i = 0; !st && i < nel; i++) {
      int64_t j = ns == 1 ? 0 : i % d;
      double fx = ua ? bcT_unary_f((bc_unary)(ua - 1), x[i]) : x[i];
      double dfx = ua ? bcT_unary_df((bc_unary)(ua - 1), x[i]) : 1.0;
      dx[i] += k * (sc ? sc[j] : 1.0) * dfx * ds[i];
      if (dsc) dsc[j] += k * fx * ds[i];
    }
  }
  return st;
}
double *bcR_dalloc(const bc_tape *tp, int64_t n, int *st) { return dalloc(tp->ctx, n, st); }
double **bcR_saved(nsave *sv, bcR_save_slot k) {
  switch (k) {
  case BCR_SV_H: return &sv->h;
  case BCR_SV_GT: return &sv->gt;
  }
  return NULL;
}
const double *bcR_saved_of(const bc_tape *tp, const bc_node *n, bcR_save_slot k) {
  return *bcR_saved(&tp->save[n->id], k);
}
const double *bcR_dy(bwd *b, int v) { return v >= 0 ? b->dv[v] : NULL; }
double *bcR_dacc(bwd *b, int v, int *st) { return dval(b, v, st); }

static double *dval(bwd *b, int v, int *st) {
  if (v < 0) return NULL;
  if (!b->dv[v]) {
    bc_shape s = shape_now(b->tp, v);
    b->dv[v] = dalloc(b->tp->ctx, bc_shape_numel(&s), st);
  }
  return b->dv[v];
}

// Canonical gradient buffers for every present piece of the node.
static int nw_grads(bc_ctx *ctx, nweights *nw) {
  int st = BC_OK;
  for (int i = 0; i < NPIECE && !st; i++)
    if (nw->pc[i].id >= 0) nw->g[i] = dalloc(ctx, piece_numel(&nw->pc[i]), &st);
  return st;
}

// Adds every piece's canonical gradient into its parameter's double
// accumulator, in the stored layout.
static int nw_scatter(bwd *b, const nweights *nw) {
  const bc_graph *g = b->tp->g;
  int st = BC_OK;
  for (int i = 0; i < NPIECE; i++) {
    const piece *p = &nw->pc[i];
    if (p->id < 0 || !nw->g[i]) continue;
    if (!b->dp[p->id] &&
        !(b->dp[p->id] = dalloc(b->tp->ctx, bc_shape_numel(&g->params[p->id].shape), &st)))
      return st;
    int64_t cols = p->cols ? p->cols : 1;
    for (int64_t o = 0; o < p->rows; o++)
      for (int64_t k = 0; k < cols; k++) b->dp[p->id][piece_at(p, o, k)] += nw->g[i][o * cols + k];
  }
  return st;
}

int bcR_bwd_ln_family(bwd *b, const bc_node *n, const ops *o, const nweights *nw) {
  bc_tape *tp = b->tp;
  const nsave *sv = &tp->save[n->id];
  int64_t rows = o->s.b * o->s.t, d = o->s.d, nel = rows * d;
  int st = BC_OK;
  double *const *G = nw->g;
  const double *w = nw->w[PN_W];
  bool rms = is_rms(n);
  if (n->op == BC_OP_LAYERNORM || n->op == BC_OP_RMSNORM) {
    double *dy = b->dv[o->vout[0]], *dx = dval(b, o->vin[0], &st);
    if (!st) ln_bwd(rms, rows, d, tp->val[o->vin[0]], sv->mean, sv->rstd, w, n->offset, dy, dx, G[PN_W], G[PN_B]);
    return st;
  }
  // ADD_LN: s = alpha*in0 + beta*in1 -> norm;  DUAL: s = alpha2*in1 + beta2*in2 -> norm
  bool dual = n->op == BC_OP_DUAL_ADD_LN;
  int lnout = dual ? o->vout[1] : o->vout[0];
  int ia = dual ? 1 : 0, ib = dual ? 2 : 1;
  double ca = dual ? n->alpha2 : n->alpha, cb = dual ? n->beta2 : n->beta;
  double *s = dalloc(tp->ctx, nel, &st), *ds = dalloc(tp->ctx, nel, &st);
  if (!dual && bcT_add_extra(n)) {  // scaled / activated operands (fuse-scale, fuse-act)
    if (!st) st = bcR_scaled_sum(tp, n, o, s);
    if (!st && o->vout[0] >= 0 && b->dv[o->vout[0]])
      ln_bwd(rms, rows, d, s, sv->mean, sv->rstd, w, n->offset, b->dv[o->vout[0]], ds, G[PN_W], G[PN_B]);
    if (!st && o->vout[1] >= 0 && b->dv[o->vout[1]])
      for (int64_t i = 0; i < nel; i++) ds[i] += b->dv[o->vout[1]][i];
    if (!st) st = bcR_scaled_sum_bwd(b, n, o, ds);
    free(s);
    free(ds);
    return st;
  }
  double *da = dval(b, o->vin[ia], &st), *dbb = dval(b, o->vin[ib], &st);
  if (!st) {
    const double *xa = tp->val[o->vin[ia]], *xb = tp->val[o->vin[ib]];
    for (int64_t i = 0; i < nel; i++) s[i] = ca * xa[i] + cb * xb[i];
    if (lnout >= 0 && b->dv[lnout])
      ln_bwd(rms, rows, d, s, sv->mean, sv->rstd, w, n->offset, b->dv[lnout], ds, G[PN_W], G[PN_B]);
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

// Scratch of one batch row's attention backward.
// With dropout: Pd the dropped weights of one head, and the key.
typedef struct attn_scratch {
  double *dcat, *dq, *dk, *dv, *dP, *Pd;
  const double *tc;  // this batch row's tanh(s / c) [H, t, s] (softcap), else NULL
  bool drop;
  unsigned long long key;
  int64_t off;  // batch row's first element of [B, H, T, S]
} attn_scratch;

// The heads of one batch row: from dcat (d loss / d concatenated heads) to
// dq [t, d], dk and dv [s, kvd] (zeroed here; a kv head sums over its group);
// d is the query width H*dh.
static void attn_heads_bwd(const bc_node *n, int64_t t, int64_t s, int64_t d, const double *q,
                           const double *k, const double *v, const double *Pb, attn_scratch *a) {
  int64_t H = n->heads, dh = d / H, kvd = n->kv_heads * dh, group = H / n->kv_heads;
  double scale = att_scale(n, dh);
  memset(a->dk, 0, (size_t)(s * kvd) * sizeof(double));
  memset(a->dv, 0, (size_t)(s * kvd) * sizeof(double));
  for (int64_t h = 0; h < H; h++) {
    const double *P = Pb + h * t * s;
    int64_t gk = (h / group) * dh;
    double *dP = a->dP;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)s, (int)dh, 1.0,
                a->dcat + h * dh, (int)d, v + gk, (int)kvd, 0.0, dP, (int)s);
    if (a->drop) attn_drop(a->key, n->dropout, a->off + h * t * s, t * s, P, a->Pd);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s, (int)dh, (int)t, 1.0,
                a->drop ? a->Pd : P, (int)s, a->dcat + h * dh, (int)d, 1.0, a->dv + gk, (int)kvd);
    if (a->drop) attn_drop(a->key, n->dropout, a->off + h * t * s, t * s, dP, dP);
    for (int64_t i = 0; i < t; i++) {  // softmax backward, in place in dP
      double dot = 0;
      for (int64_t j = 0; j < s; j++) dot += P[i * s + j] * dP[i * s + j];
      for (int64_t j = 0; j < s; j++) dP[i * s + j] = P[i * s + j] * (dP[i * s + j] - dot);
      if (a->tc)  // through the soft-cap: d(c tanh(s/c))/ds = 1 - tanh^2
        for (int64_t j = 0; j < s; j++) {
          double tj = a->tc[(h * t + i) * s + j];
          dP[i * s + j] *= 1.0 - tj * tj;
        }
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)dh, (int)s, scale, dP,
                (int)s, k + gk, (int)kvd, 0.0, a->dq + h * dh, (int)d);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)s, (int)dh, (int)t, scale, dP,
                (int)s, q + h * dh, (int)d, 1.0, a->dk + gk, (int)kvd);
  }
  if (n->rope) {  // back through the rotations: the transpose is the rotation by -pos
    for (int64_t i = 0; i < t; i++) rope_row(a->dq + i * d, H, dh, -(double)i, n->rope_theta);
    for (int64_t j = 0; j < s; j++) rope_row(a->dk + j * kvd, n->kv_heads, dh, -(double)j, n->rope_theta);
  }
}

int bcR_bwd_attention(bwd *b, const bc_node *n, const ops *o, const nweights *nw) {
  bc_tape *tp = b->tp;
  const nsave *sv = &tp->save[n->id];
  int64_t B = o->s.b, t = o->s.t, d = o->s.d, s = o->kv.t, H = n->heads;
  int64_t dh = bc_head_dim(n, d), qd = H * dh, kvd = n->kv_heads * dh;
  const double *DY = b->dv[o->vout[0]];
  bool cross = o->vin[1] >= 0;
  int st = BC_OK;
  double *DX = dval(b, o->vin[0], &st), *DKV = cross ? dval(b, o->vin[1], &st) : DX;
  attn_scratch a = {dalloc(tp->ctx, t * qd, &st), dalloc(tp->ctx, t * qd, &st),
                    dalloc(tp->ctx, s * kvd, &st), dalloc(tp->ctx, s * kvd, &st),
                    dalloc(tp->ctx, t * s, &st), NULL, NULL, false, 0, 0};
  a.drop = bcR_dropping(tp, n, n->dropout, &a.key);
  if (a.drop) a.Pd = dalloc(tp->ctx, t * s, &st);
  const double *X = tp->val[o->vin[0]], *KV = cross ? tp->val[o->vin[1]] : X;
  double *const *W = nw->w, *const *G = nw->g;
  for (int64_t bi = 0; bi < B && !st; bi++) {
    int64_t qv, kvv;
    attn_valid(o, bi, &qv, &kvv);
    const double *x = X + bi * t * d, *kv = KV + bi * s * d;
    memset(a.dcat, 0, (size_t)(t * qd) * sizeof *a.dcat);
    a.off = bi * H * t * s;
    lin_bwd(qv, qd, d, sv->cat + bi * t * qd, W[PA_O], DY + bi * t * d, a.dcat, G[PA_O], G[PA_BO]);
    if (n->head_scale) {  // dhs[h] += sum dcat * heads;  dheads = dcat * hs[h]
      const double *cu = sv->catu + bi * t * qd;
      for (int64_t i = 0; i < t * qd; i++) {
        G[PA_HS][(i % qd) / dh] += a.dcat[i] * cu[i];
        a.dcat[i] *= W[PA_HS][(i % qd) / dh];
      }
    }
    a.tc = sv->tc ? sv->tc + bi * H * t * s : NULL;
    attn_heads_bwd(n, t, s, qd, sv->q + bi * t * qd, sv->k + bi * s * kvd, sv->v + bi * s * kvd,
                   sv->p + bi * H * t * s, &a);
    if (n->qk_norm &&
        (st = qk_norm_bwd(tp->ctx, n, t, s, qd, kvd, nw, sv->qpre + bi * t * qd,
                          sv->kpre + bi * s * kvd, a.dq, a.dk)))
      break;
    lin_bwd(t, d, qd, x, W[PA_Q], a.dq, DX + bi * t * d, G[PA_Q], G[PA_BQ]);
    lin_bwd(s, d, kvd, kv, W[PA_K], a.dk, DKV + bi * s * d, G[PA_K], G[PA_BK]);
    lin_bwd(s, d, kvd, kv, W[PA_V], a.dv, DKV + bi * s * d, G[PA_V], G[PA_BV]);
  }
  free(a.dcat); free(a.dq); free(a.dk); free(a.dv); free(a.dP); free(a.Pd);
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
  nweights nw;
  if ((st = node_weights(tp, n, o.s.d, &nw))) return st;
  st = nw_grads(tp->ctx, &nw);
  const bc_op_def *def = bcT_def(n->op);
  if (!st) st = def ? def->ref_bwd(b, n, &o, &nw) : node_err(tp, n, "unknown op");
  if (!st) st = nw_scatter(b, &nw);
  nw_free(&nw);
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
  return bcR_grad_ex(ctx, g, w, io, rt, NULL, dy, dw, dx);
}

int bcR_grad_ex(bc_ctx *ctx, const bc_graph *g, const bc_weights *w, void *const *io,
                const long *rt, const bc_train_rng *rng, const float *const *dy, bc_weights *dw,
                float **dx) {
  bc_tape *tp;
  int st = bcR_tape_forward_ex(ctx, g, w, io, rt, rng, &tp);
  if (st) return st;
  st = bcR_tape_backward(tp, dy, dw, dx);
  bcR_tape_free(tp);
  return st;
}

double bcR_tape_bytes(const bc_graph *g, const long *rt) {
  double bytes = 0;
  for (int v = 0; v < g->nvals; v++) {
    bc_shape s = rt ? bcI_shape_at(g, &g->vals[v].shape, rt) : g->vals[v].shape;
    bytes += (double)bc_shape_numel(&s) * 8 * 2;  // the value and its gradient
  }
  for (int p = 0; p < g->nparams; p++)
    bytes += (double)bc_shape_numel(&g->params[p].shape) * 8 * 2;  // widened, and its gradient
  return bytes;
}
