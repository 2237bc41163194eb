// ops/softcap.c — Softcap: out = cap * tanh(x / cap), elementwise (issue 23).
//
// Gemma 2 soft-caps its final logits (final_logit_softcapping = 30) so that
// no logit exceeds +-cap while small ones pass almost unchanged (slope 1 at
// 0).  The attention scores' soft-cap is Attention's softcap= option
// (ops/attention.c), applied inside the softmax kernel; this node is the one
// a graph writes on any value.  The gradient is dy * (1 - tanh(x / cap)^2),
// computed from the input (which the backward keeps, as Mul's does).
//
// Every stage of the op is here, written against ops.h.
#include "ops.h"

#include <math.h>

// --- parser: cap=c > 0, the output has the input's shape -------------------------
static void softcap_build(struct bcP_parser *P, const bc_op_info *info, bc_node *n,
                          const bc_token *optok, const bc_loc *posloc, const bcP_attr_vals *av,
                          const bc_shape *inp, bc_shape *out) {
  (void)optok, (void)posloc, (void)inp, (void)out;
  int kc = bcP_attr(P, info, "cap");
  double c = av->fval[kc];
  if (!(c > 0) || !isfinite(c))
    bcP_error_at(P, av->loc[kc], "Softcap cap=%g must be a positive finite number (out = cap * "
                 "tanh(x / cap))", c);
  n->cap = c;
}

// --- reference interpreter and backward, in double --------------------------------
static int softcap_interp(struct bcR_interp *in, const bc_node *n, const bcR_operands *o) {
  (void)in;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  for (int64_t i = 0; i < nel; i++) o->y[0][i] = (float)(n->cap * tanh((double)o->x[0][i] / n->cap));
  return BC_OK;
}

static int softcap_ref_fwd(bc_tape *tp, const bc_node *n, const bcR_ops *o,
                           const struct bcR_nweights *nw, struct bcR_nsave *sv) {
  (void)nw, (void)sv;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *x = bcR_tape_val(tp, o->vin[0]);
  double *y = bcR_tape_val(tp, o->vout[0]);
  for (int64_t i = 0; i < nel; i++) y[i] = n->cap * tanh(x[i] / n->cap);
  return BC_OK;
}

static int softcap_ref_bwd(struct bcR_bwd *b, const bc_node *n, const bcR_ops *o,
                           const struct bcR_nweights *nw) {
  (void)nw;
  int st = BC_OK;
  int64_t nel = o->s.b * o->s.t * o->s.d;
  const double *dy = bcR_dy(b, o->vout[0]), *x = bcR_tape_val(bcR_bwd_tape(b), o->vin[0]);
  double *dx = bcR_dacc(b, o->vin[0], &st);
  for (int64_t i = 0; !st && i < nel; i++) {
    double t = tanh(x[i] / n->cap);
    dx[i] += dy[i] * (1.0 - t * t);
  }
  return st;
}

// --- emitted forward and backward -------------------------------------------------
static void softcap_emit(struct bcE_emitter *E, const bc_node *n) {
  if (bcE_gemm_only(E) || !bcE_same_numel(E, n, 1)) return;
  char fc[32];
  bc_sb_add(bcE_body(E), "  bcrt_softcap(%s, %s, %s, %s);\n", bcE_numel(E, n->out[0]),
            bcE_flit(E, n->cap, fc, sizeof fc), bcE_vptr(E, n->in[0]), bcE_vptr(E, n->out[0]));
}

static void softcap_grad_fwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_softcap((long)%s*%lld, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_fl(E, n->cap), bcG_val(E, n->in[0]), bcG_val(E, n->out[0]));
}

static void softcap_grad_bwd(struct bcG_emitter *E, const bc_node *n) {
  bcG_dims s = bcG_dims_of(E, n->in[0]);
  bcG_kput(E, "  bcrt_softcap_bwd((long)%s*%lld, %s, %s, %s, %s);\n", s.rows, (long long)s.D,
           bcG_fl(E, n->cap), bcG_val(E, n->in[0]), bcG_dval(E, n->out[0]),
           bcG_dval(E, n->in[0]));
}

// --- attributes ---------------------------------------------------------------------
static void softcap_defaults(bc_node *n) { n->cap = 1.0; }
static bool softcap_same(const bc_node *a, const bc_node *b) { return a->cap == b->cap; }

static void softcap_attrs(const bc_node *n, bc_attrs_view view, bc_sbuf *out) {
  if (view == BC_ATTRS_DOT) bc_sb_add(out, "\\ncap=%g", n->cap);
  else bc_sb_add(out, " cap=%.9g", n->cap);
}

const bc_op_def bcT_softcap = {
    .op = BC_OP_SOFTCAP,
    .rowwise = true,
    .info = {"Softcap", true, 1, 1, 1, 1, 1, "cap * tanh(x / cap)",
             {{"cap", BC_AT_FLOAT, true, 0}}},
    .inplace = {1u},  // elementwise: y may overwrite x (the emitted backward keeps its own x)
    .params = "none",
    .dot_color = "#eeeeee",
    .defaults = softcap_defaults,
    .same_attrs = softcap_same,
    .attrs = softcap_attrs,
    .build = softcap_build,
    .scratch = bcM_no_scratch,
    .interp = softcap_interp,
    .ref_weights = bcR_no_pieces,
    .ref_fwd = softcap_ref_fwd,
    .ref_bwd = softcap_ref_bwd,
    .emit = softcap_emit,
    .grad_check = bcG_supported,
    .grad_buffers = bcG_no_buffers,
    .grad_fwd = softcap_grad_fwd,
    .grad_bwd = softcap_grad_bwd,
};
