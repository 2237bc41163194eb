// ops/dropout.c — Dropout(x, p=0.1): the identity at inference; in training
// (the reference backward and the emitted `<model>_backward_ex` with
// training set) element e of x is kept iff u(seed, step, node, e) >= p and
// scaled by 1/(1-p), else zeroed.  u is the runtime's counter-based
// generator (runtime/src/rng.c documents the function); node is the node's
// key_node (its creation index: the graph file's call order, kept by the
// passes), e the flat index in x.  The backward regenerates the mask:
// dx += mask * dy / (1-p).  p = 0 is the identity everywhere (no draws);
// 0 <= p < 1 is checked at the call.
//
// Every stage of the op is here, written against ops.h (ops/add.c's shape).
#include "ops.h"

#include "blockc_rt.h"  // bcrt_drop_*: the same generator as the emitted code

#include <math.h>

// The attribute family shared with Attention's and FFN's dropout=.
static void dropout_defaults(bc_node *n) { n->dropout = 0.1; }

static bool dropout_same(const bc_node *a, const bc_node *b) { return a->dropout == b->dropout; }

// --- parser: one float input; p= in [0, 1) ------------------------------------------
static void dropout_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                          const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                          const bc_shape *inp, bc_shape *out) {
  (void)posloc, (void)out, (void)inp;
  bc_graph *g = bcP_graph(P);
  if (g->vals[n->in[0]].type != BC_VT_F32)
    bcP_error_at(P, optok->loc, "Dropout needs a float input, not token ids or lengths");
  int kp = bcP_attr(P, info, "p");
  if (av->have[kp]) n->dropout = av->fval[kp];
  if (!(n->dropout >= 0 && n->dropout < 1))
    bcP_error_at(P, av->have[kp] ? av->loc[kp] : optok->loc,
                 "Dropout p=%g is outside [0, 1) (p is the probability of zeroing an element)",
                 n->dropout);
}

// --- reference interpreter: inference, the identity -------------------------------
static int dropout_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  (void)in, (void)n;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = o->x[0][i];
  return BC_OK;
}

// --- reference backward: the mask regenerated from the tape's generator -------------
bool bcR_dropping(const bc_tape *tp, const bc_node *n, double p, unsigned long long *key) {
  const bc_train_rng *r = bcR_tape_rng(tp);
  if (!r->training || !(p > 0)) return false;
  *key = bcrt_drop_key(r->seed, r->step, n->key_node);
  return true;
}

// u(e) = bits / 2^24 is exact in float and double, so u >= p here decides
// as the kernels' bits >= ceil(p 2^24) do.
double bcR_drop_factor(unsigned long long key, double p, int64_t e) {
  return (double)bcrt_drop_uniform(key, (long)e) >= p ? 1.0 / (1.0 - p) : 0.0;
}

// m(e) = keep(e) / (1-p) when the tape drops, else 1.
static double drop_factor(bool on, unsigned long long key, double p, int64_t e) {
  return on ? bcR_drop_factor(key, p, e) : 1.0;
}

static int dropout_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                           const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  unsigned long long key = 0;
  bool on = bcR_dropping(tp, n, n->dropout, &key);
  const double *x = bcR_tape_val(tp, o->vin[0]);
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = x[i] * drop_factor(on, key, n->dropout, i);
  return BC_OK;
}

static int dropout_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                           const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  unsigned long long key = 0;
  bool on = bcR_dropping(bcR_bwd_tape(b), n, n->dropout, &key);
  const double *dy = bcR_dy(b, o->vout[0]);
  double *dx = bcR_dacc(b, o->vin[0], &st);
  for (int64_t i = 0; !st && i < nel; i++) dx[i] += dy[i] * drop_factor(on, key, n->dropout, i);
  return st;
}

// --- emitted forward (inference: a copy, nothing when in place) ---------------------
static void dropout_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E) || !bcE_same_numel(E, n, 1)) return;
  bc_sb_add(bcE_body(E), "  bcrt_copy(%s, %s, %s);  // inference: no dropout\n",
            bcE_numel(E, n->out[0]), bcE_vptr(E, n->in[0]), bcE_vptr(E, n->out[0]));
}

// --- emitted backward: the training forward drops when BC_training ------------------
static void dropout_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  const char *x = bcG_val(E, n->in[0]), *y = bcG_val(E, n->out[0]);
  if (n->dropout > 0)
    bcG_kput(E, "  if (BC_training) bcrt_dropout((long)%s*%lld, %s, %s, %s, 0, %uu, %s);\n  else ",
             s.rows, (long long)s.D, x, y, bcG_drop_key(E, n), bcrt_drop_threshold(n->dropout),
             bcG_fl(E, 1.0 / (1.0 - n->dropout)));
  bcG_kput(E, "  bcrt_copy((long)%s*%lld, %s, %s);\n", s.rows, (long long)s.D, x, y);
}

static void dropout_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  const char *dy = bcG_dval(E, n->out[0]), *dx = bcG_dval(E, n->in[0]);
  if (n->dropout > 0) {
    bcG_dims s = bcG_dims_of(E, n->in[0]);
    bcG_kput(E, "  if (BC_training) bcrt_dropout_acc((long)%s*%lld, %s, %s, %s, 0, %uu, %s);\n  else ",
             s.rows, (long long)s.D, dy, dx, bcG_drop_key(E, n), bcrt_drop_threshold(n->dropout),
             bcG_fl(E, 1.0 / (1.0 - n->dropout)));
  }
  bcG_axpy(E, n->in[0], 1.0, dy, dx);
}

// --- printing -------------------------------------------------------------------
static void dropout_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DUMP) bc_sb_add(out, " p=%.9g", n->dropout);
  else if (view == BC_ATTRS_COMMENT) bc_sb_add(out, " p=%g", n->dropout);
  else bc_sb_add(out, "\\np=%g", n->dropout);
}

const bc_op_def bcT_dropout = {
    .op = BC_OP_DROPOUT,
    .rowwise = true,
    .info = {"Dropout", true, 1, 1, 1, 1, 1, "x, zeroed with probability p in training (scaled 1/(1-p))",
             {{"p", BC_AT_FLOAT, false, 0}}},
    .inplace = {1u},
    .params = "none",
    .dot_color = "#f4f4f4",
    .defaults = dropout_defaults,
    .same_attrs = dropout_same,
    .attrs = dropout_attrs,
    .build = dropout_build,
    .scratch = bcM_no_scratch,
    .interp = dropout_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = dropout_ref_fwd,
    .ref_bwd = dropout_ref_bwd,
    .emit = dropout_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = dropout_grad_fwd,
    .grad_bwd = dropout_grad_bwd,
};
